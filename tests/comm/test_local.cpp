#include <catch2/catch.hpp>

#include <atomic>

#include "collective_checks.h"
#include "comm/local_communicator.h"

using namespace frugal::comm;

namespace {
// Tiny thresholds make the ring algorithms (and their segmenting) run on small inputs too.
constexpr CollectiveTuning kRingAlways{.ring_threshold_bytes = 0, .segment_bytes = 12};
}  // namespace

TEST_CASE("local: every collective, world sizes 1..4, small sizes, direct and ring") {
  for (int p = 1; p <= 4; ++p) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
      for (auto tuning : {CollectiveTuning{}, kRingAlways}) {
        INFO("world " << p << ", n " << n << ", ring threshold " << tuning.ring_threshold_bytes);
        REQUIRE_NOTHROW(run_local(p, [&](Communicator& c) { testing::check_collectives(c, n); },
                                  tuning));
      }
    }
  }
}

TEST_CASE("local: 1M floats, world sizes 2..4") {
  for (int p = 2; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_local(p, [&](Communicator& c) {
      testing::check_all_reduce(c, 1 << 20);
      testing::check_all_gather(c, 1 << 20);
      testing::check_reduce_scatter(c, 1 << 20);
      testing::check_broadcast(c, 1 << 20);
    }));
  }
}

TEST_CASE("local: 64 MB all_reduce on 2 ranks") {
  REQUIRE_NOTHROW(run_local(2, [](Communicator& c) { testing::check_all_reduce(c, 16 << 20); }));
}

TEST_CASE("local: split into sub-communicators") {
  for (int p = 1; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_local(p, [](Communicator& c) { testing::check_split(c); }));
  }
}

TEST_CASE("local: mismatched collectives fail on every rank instead of hanging") {
  std::atomic<int> failures{0};
  std::string message;
  std::mutex m;
  auto comms = make_local_communicators(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      frugal::set_error_rank(r);
      Communicator& c = *comms[r];
      std::vector<float> v(10 + (r == 2 ? 1 : 0), 1.0f);  // rank 2 passes 11 floats
      try {
        c.all_reduce(v).wait();
      } catch (const CommError& e) {
        ++failures;
        std::lock_guard lock(m);
        message += std::string(e.what()) + "\n";
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 3);
  CHECK_THAT(message, Catch::Contains("collective mismatch"));
}

TEST_CASE("local: a different collective on one rank is reported, and the communicator stays dead") {
  auto comms = make_local_communicators(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *comms[r];
      std::vector<float> v(4, 1.0f);
      try {
        if (r == 0) c.all_reduce(v).wait(); else c.broadcast(v, 1).wait();
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
      try {
        c.barrier().wait();
        errors[r] += "\nbarrier succeeded";
      } catch (const CommError& e) {
        errors[r] += "\nlater: " + std::string(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("mismatch"));
    CHECK_THAT(errors[r], Catch::Contains("later: barrier"));
  }
}

TEST_CASE("local: a rank that throws makes the others fail, not hang") {
  try {
    run_local(3, [](Communicator& c) {
      if (c.rank() == 1) throw frugal::Error("rank 1 gave up");
      std::vector<float> v(100, 1.0f);
      c.all_reduce(v).wait();
    });
    FAIL("no exception");
  } catch (const frugal::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 1 gave up"));
  }
}

TEST_CASE("local: byte accounting per kind and per peer") {
  run_local(2, [](Communicator& c) {
    const CommStats before = c.stats();
    std::vector<float> v(1000, 1.0f);  // 4000 bytes, direct: one frame to the other rank
    c.all_reduce(v).wait();
    const CommStats d = c.stats() - before;
    const auto& ar = d.kind(OpKind::all_reduce);
    FRUGAL_CHECK(ar.sent == 4000 + 56 && ar.received == 4000 + 56 && ar.messages_sent == 1,
                 "all_reduce bytes: " + std::to_string(ar.sent) + " / " + std::to_string(ar.received));
    FRUGAL_CHECK(d.by_peer.at(1 - c.rank()).sent == 4056, "per-peer bytes wrong");
    FRUGAL_CHECK(d.kind(OpKind::all_gather).sent == 0, "other kinds must stay zero");
    c.reset_stats();
    FRUGAL_CHECK(c.stats().total().sent == 0, "reset_stats left bytes");
  });
}
