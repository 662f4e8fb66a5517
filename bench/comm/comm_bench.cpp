// All-reduce and all-gather time and throughput versus message size, on whatever backend the
// process was started with (comm::init), or in-process with --local P. Rank 0 prints one CSV line
// per (operation, size): backend,ranks,op,bytes,seconds_per_op,GB_per_s. bytes is the message
// size per rank (all-reduce: the vector; all-gather: each rank's part); GB/s = bytes / time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/init.h"
#include "comm/local_communicator.h"

using namespace frugal::comm;

namespace {

// each: rank 0 also prints every repetition's time (ms) to stderr, to see stalls behind a mean.
bool each = false;

void bench(Communicator& c, size_t min_bytes, size_t max_bytes) {
  for (const char* op : {"all_reduce", "all_gather"}) {
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const size_t n = bytes / sizeof(float);
      std::vector<float> v(n, 1.0f), all(std::strcmp(op, "all_gather") == 0 ? n * c.size() : 0);
      auto once = [&] {
        if (all.empty()) {
          c.all_reduce(v).wait();
        } else {
          c.all_gather(v, all).wait();
        }
      };
      once();  // warm-up: connections, allocations
      const int reps = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / bytes, 3, 200));
      c.barrier().wait();
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<double> times;
      for (int i = 0; i < reps; ++i) {
        const auto r0 = std::chrono::steady_clock::now();
        once();
        if (each) times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r0).count());
      }
      if (each && c.rank() == 0) {
        std::string line = fmt::format("{} {} ms:", op, bytes);
        for (const double t : times) line += fmt::format(" {:.2f}", t);
        fmt::print(stderr, "{}\n", line);
      }
      std::vector<float> secs{static_cast<float>(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps)};
      c.all_reduce(secs, ReduceOp::max).wait();  // the slowest rank defines the time
      if (c.rank() == 0) {
        fmt::print("{},{},{},{},{:.6f},{:.3f}\n", c.backend(), c.size(), op, bytes, secs[0],
                   static_cast<double>(bytes) / secs[0] / 1e9);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    size_t min_bytes = 4 << 10, max_bytes = 64 << 20;
    int local = 0;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--local") == 0 && i + 1 < argc) local = std::atoi(argv[++i]);
      if (std::strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) max_bytes = std::strtoull(argv[++i], nullptr, 10);
      if (std::strcmp(argv[i], "--each") == 0) each = true;
      if (std::strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc) min_bytes = std::strtoull(argv[++i], nullptr, 10);
    }
    if (local > 0) {
      run_local(local, [&](Communicator& c) { bench(c, min_bytes, max_bytes); });
    } else {
      auto comm = init(argc, argv);
      bench(*comm, min_bytes, max_bytes);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "comm_bench: {}\n", e.what());
    return 1;
  }
}
