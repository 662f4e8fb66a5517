// Run under mpirun (see meson.build): every rank runs the same test cases in the same order.
#include <catch2/catch.hpp>

#include "collective_checks.h"
#include "comm/mpi_communicator.h"

using namespace frugal::comm;

namespace {
Communicator& world() {
  static auto comm = make_mpi_communicator({{"test", "mpi"}});
  return *comm;
}
}  // namespace

TEST_CASE("mpi: started by mpirun, ranks and size") {
  REQUIRE(started_by_mpirun());
  REQUIRE(world().size() >= 1);
  REQUIRE(world().rank() < world().size());
  REQUIRE(world().backend() == "mpi");
}

TEST_CASE("mpi: every collective, small sizes and 1M floats") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{1} << 20}) {
    INFO("n " << n);
    REQUIRE_NOTHROW(testing::check_collectives(world(), n));
  }
}

TEST_CASE("mpi: 64 MB all_reduce (2 ranks only, to bound memory and time)") {
  if (world().size() == 2) REQUIRE_NOTHROW(testing::check_all_reduce(world(), 16 << 20));
}

TEST_CASE("mpi: split into sub-communicators") { REQUIRE_NOTHROW(testing::check_split(world())); }

TEST_CASE("mpi: mismatched collectives raise on every rank, no deadlock") {
  auto sub = world().split(0, world().rank());  // keep the world communicator healthy
  if (sub->size() < 2) return;
  std::vector<float> v(10 + (sub->rank() == 1 ? 1 : 0), 1.0f);
  try {
    sub->all_reduce(v).wait();
    FAIL("mismatch not detected");
  } catch (const CommError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("collective mismatch"));
  }
  // The failed communicator stays failed; the world still works.
  CHECK_THROWS_AS(sub->barrier().wait(), CommError);
  std::vector<float> one{1.0f};
  world().all_reduce(one).wait();
  CHECK(one[0] == static_cast<float>(world().size()));
}

TEST_CASE("mpi: bytes are accounted per operation kind") {
  const CommStats before = world().stats();
  std::vector<float> v(1000, 1.0f);
  world().all_reduce(v).wait();
  const CommStats d = world().stats() - before;
  const uint64_t p = static_cast<uint64_t>(world().size());
  CHECK(d.kind(OpKind::all_reduce).sent == 2 * (p - 1) * 4000 / p);
}
