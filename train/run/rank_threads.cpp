#include "train/run/rank_threads.h"

#include <fmt/format.h>

#include "core/check.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "comm/environment.h"
#include "comm/slurm.h"
#include "core/parse.h"

namespace frugal::run {
namespace {

std::optional<int> local_ranks() {
  for (const std::string_view name : {comm::env::kLocalSize, comm::env::kMpiLocalSize}) {
    const std::string key(name);
    if (const char* text = std::getenv(key.c_str()); text != nullptr && *text != '\0')
      return parse_number<int>(key, text, "a rank count, at least 1", [](int n) { return n >= 1; });
  }
  // A task of srun (comm::init reads the same variables for its rank, comm/slurm.h).
  if (const auto task = comm::slurm::from_environment()) return task->local_size;
  return std::nullopt;
}

}  // namespace

int threads_for_rank(int requested) {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Far more threads than cores only thrashes, and beyond a few thousand the thread pools and
  // oneDNN's primitives fail with their own words: refused here, naming the flag.
  const int most = 16 * hardware;
  if (requested < 0 || requested > most)
    throw Error(fmt::format("--threads {}: expected 0 (all cores) up to {} (16 per core of this machine's {})",
                            requested, most, hardware));
  if (requested > 0) return requested;
  const std::optional<int> ranks = local_ranks();
  if (!ranks) return 0;  // the backend's "all cores"
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / *ranks);
}

}  // namespace frugal::run
