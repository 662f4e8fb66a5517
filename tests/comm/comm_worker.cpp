// A rank program for the multi-process tests: joins through frugal::comm::init (so it works under
// `frugal launch`, mpirun, or with FRUGAL_* set by the test) and runs one scenario.
//   comm_worker collectives          every collective at a few sizes, then "rank R ok"
//   comm_worker allreduce-loop       all-reduces of 1M floats until something fails; prints
//                                    "ready" after the first and "FAILED: <error>" at the end
//   comm_worker exit-after R CODE    after a barrier, rank R exits with CODE; the others wait
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collective_checks.h"
#include "comm/init.h"

using namespace frugal::comm;

int main(int argc, char** argv) {
  try {
    auto comm = init(argc, argv, {.run_config = {{"worker", "comm_worker"}}});
    const std::string scenario = argc > 1 ? argv[1] : "collectives";
    if (scenario == "collectives") {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{100001}}) testing::check_collectives(*comm, n);
      testing::check_split(*comm);
      fmt::print("rank {} ok ({} ranks, {})\n", comm->rank(), comm->size(), comm->backend());
      return 0;
    }
    if (scenario == "allreduce-loop") {
      std::vector<float> v(1 << 20, 1.0f);
      for (long i = 0;; ++i) {
        try {
          comm->all_reduce(v).wait();
        } catch (const std::exception& e) {
          fmt::print("FAILED: {}\n", e.what());
          std::fflush(stdout);
          std::_Exit(1);  // skip the goodbye handshake: the test measures detection only
        }
        if (i == 0) {
          fmt::print("ready\n");
          std::fflush(stdout);
        }
      }
    }
    if (scenario == "exit-after" && argc > 3) {
      comm->barrier().wait();
      if (comm->rank() == std::atoi(argv[2])) return std::atoi(argv[3]);
      comm->barrier().wait();  // never completes: the launcher must stop us
      return 0;
    }
    fmt::print(stderr, "comm_worker: unknown scenario '{}'\n", scenario);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "comm_worker: {}\n", e.what());
    return 1;
  }
}
