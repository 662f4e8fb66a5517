// A rank program for the multi-process tests: joins through frugal::comm::init (so it works under
// `frugal launch`, mpirun, or with FRUGAL_* set by the test) and runs one scenario.
//   comm_worker collectives          every collective at a few sizes, then "rank R ok"
//   comm_worker allreduce-loop       all-reduces of 1M floats until something fails; prints
//                                    "ready" after the first and "FAILED: <error>" at the end
//   comm_worker allgather-loop       the same with all-gathers of 1000 floats a rank (direct exchanges)
//   comm_worker orphan R             one all-gather, then every rank but R exits without a goodbye and
//                                    R goes on all-gathering ("FAILED: <error>" once it notices)
//   comm_worker exit-after R CODE    after a barrier, rank R exits with CODE; the others wait
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
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
    // Collectives until one fails: "ready" after the first, "FAILED: <error>" at the end.
    const auto loop = [](const std::function<void()>& collective) {
      for (long i = 0;; ++i) {
        try {
          collective();
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
    };
    if (scenario == "allreduce-loop") {
      std::vector<float> v(1 << 20, 1.0f);
      loop([&] { comm->all_reduce(v).wait(); });
    }
    if (scenario == "allgather-loop") {  // small: a direct exchange, a frame to every peer
      std::vector<float> mine(1000, 1.0f), all(1000 * static_cast<size_t>(comm->size()));
      loop([&] { comm->all_gather(mine, all).wait(); });
    }
    if (scenario == "orphan" && argc > 2) {
      // After one all-gather every rank but R exits at once, without a goodbye (a crash); R then
      // all-gathers with peers that are gone, so its frames to each of them stay queued.
      const int survivor = std::atoi(argv[2]);
      std::vector<float> mine(1000, 1.0f), all(1000 * static_cast<size_t>(comm->size()));
      comm->all_gather(mine, all).wait();
      if (comm->rank() != survivor) {
        fmt::print("exiting\n");
        std::fflush(stdout);
        std::_Exit(0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      loop([&] { comm->all_gather(mine, all).wait(); });
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
