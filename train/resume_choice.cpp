#include "train/resume_choice.h"
#include "core/say.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/communicator.h"
#include "core/warnings.h"

namespace frugal::train {
namespace {

// What identifies a checkpoint across ranks: its run, epoch and step (fixed size for the all-gather).
struct CheckpointKey {
  uint64_t epoch = 0, step = 0;
  char run[32] = {};

  bool operator==(const CheckpointKey& o) const {
    return epoch == o.epoch && step == o.step && std::memcmp(run, o.run, sizeof run) == 0;
  }
  std::string describe() const {
    const std::string id(run, strnlen(run, sizeof run));
    return fmt::format("epoch {}, step {} of run {}", epoch, step, id.empty() ? "(unnamed)" : id);
  }
};

}  // namespace

void require_same_resume(const std::string& dir, uint64_t epoch, uint64_t step, const std::string& run,
                         comm::Communicator& world) {
  CheckpointKey mine;
  mine.epoch = epoch;
  mine.step = step;
  // The last bytes of a long identifier (a folder's path ends in its epoch) tell checkpoints apart.
  const std::string id = run.size() < sizeof mine.run ? run : run.substr(run.size() - (sizeof mine.run - 1));
  std::memcpy(mine.run, id.data(), id.size());
  const std::vector<CheckpointKey> all =
      world.size() > 1 ? comm::all_gather_value(world, mine, "resume checkpoint") : std::vector<CheckpointKey>{mine};
  std::vector<std::string> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (!(all[r] == all[0])) differ.push_back(fmt::format("rank {} has {}", r, all[r].describe()));
  FRUGAL_CHECK(differ.empty(),
               fmt::format("--resume {}: the ranks do not see the same checkpoint: rank 0 has {}, {} (every rank must "
                           "read the same folder: a shared file system, or identical copies)",
                           dir, all[0].describe(), fmt::join(differ, ", ")));
}

CheckpointChoice choose_resume_checkpoint(const std::string& dir, bool accept_unchecked, comm::Communicator& world) {
  CheckpointChoice choice = newest_intact_checkpoint(dir, accept_unchecked);
  const int rank = world.rank();
  if (rank == 0)
    for (const SkippedCheckpoint& s : choice.skipped)
      say_notice("--resume {}: skipping the checkpoint of {}: {}\n", dir, s.manifest, s.reason);
  require_same_resume(dir, choice.manifest.epoch, choice.manifest.step, choice.manifest.run, world);
  // Every rank looks (under --strict every rank stops); rank 0 alone says it.
  if (choice.skipped.empty())
    if (const std::string older = older_manifest_warning(dir, choice.manifest); !older.empty()) {
      const std::string message = fmt::format("--resume {}: {}", dir, older);
      if (rank == 0) warn(message);
      else FRUGAL_CHECK(!strict_warnings(), message);
    }
  return choice;
}

}  // namespace frugal::train
