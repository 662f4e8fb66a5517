// A rank program for tests/comm/test_launch_bandwidth.sh: joins through frugal::comm::init and
// measures what its links carry.
//   bandwidth_probe rate MB ITERS    ITERS all-reduces of MB megabytes, each result checked; prints
//                                    "rank R rate_mbit=X sent_bytes=B seconds=S" (wire bytes this
//                                    rank sent during the timed all-reduces, over their time)
//   bandwidth_probe fail R CODE      after one all-reduce rank R exits with CODE; the others
//                                    sleep, so only the launcher stopping them ends the run (and
//                                    rank R's status is the launch's, deterministically)
//   bandwidth_probe hold             one all-reduce, "ready", then sleeps: the launcher must stop it
// Every scenario first prints "rank R bind=<FRUGAL_BIND_HOST> netns=<network namespace>" so the
// test can check that each rank runs in its own namespace with its own address.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/init.h"

using namespace frugal::comm;

namespace {

// Fills with rank + 1 and checks the sum 1 + 2 + ... + size: a rank that received nothing, or
// garbage, fails here instead of printing a rate.
void checked_all_reduce(Communicator& comm, std::vector<float>& v) {
  std::fill(v.begin(), v.end(), static_cast<float>(comm.rank() + 1));
  comm.all_reduce(v).wait();
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  for (size_t i = 0; i < v.size(); i += 997) {
    if (v[i] != want) {
      throw std::runtime_error(fmt::format("all_reduce gave {} at {}, expected {}", v[i], i, want));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto comm = init(argc, argv, {.run_config = {{"program", "bandwidth_probe"}}});
    const std::string scenario = argc > 1 ? argv[1] : "rate";
    char netns[256] = "?";
    const ssize_t n = ::readlink("/proc/self/ns/net", netns, sizeof netns - 1);
    netns[n > 0 ? n : 0] = '\0';
    const char* bind = std::getenv("FRUGAL_BIND_HOST");
    fmt::print("rank {} bind={} netns={}\n", comm->rank(), bind ? bind : "-", netns);
    std::fflush(stdout);

    if (scenario == "rate" && argc > 3) {
      const size_t floats = static_cast<size_t>(std::atof(argv[2]) * 1e6 / sizeof(float));
      const int iters = std::atoi(argv[3]);
      std::vector<float> v(floats);
      checked_all_reduce(*comm, v);  // warm-up: connections, TCP windows
      const auto before = comm->stats();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) checked_all_reduce(*comm, v);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto sent = (comm->stats() - before).total().sent;
      fmt::print("rank {} rate_mbit={:.1f} sent_bytes={} seconds={:.3f}\n", comm->rank(),
                 static_cast<double>(sent) * 8 / seconds / 1e6, sent, seconds);
      return 0;
    }
    if (scenario == "fail" && argc > 3) {
      std::vector<float> v(1 << 18);
      checked_all_reduce(*comm, v);
      if (comm->rank() == std::atoi(argv[2])) return std::atoi(argv[3]);
      std::this_thread::sleep_for(std::chrono::minutes(5));
      return 0;
    }
    if (scenario == "hold") {
      std::vector<float> v(1 << 18);
      checked_all_reduce(*comm, v);
      fmt::print("rank {} ready\n", comm->rank());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::minutes(5));
      return 0;
    }
    fmt::print(stderr, "bandwidth_probe: unknown scenario '{}'\n", scenario);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bandwidth_probe: {}\n", e.what());
    return 1;
  }
}
