// --resume DIR for every trainer (plain, pipeline): the checkpoint the run starts from, chosen and
// checked in one place (issue 62). Every rank reads DIR and makes the same choice when they see the
// same files; ranks that do not (a folder copied at different times, a node with a stale copy)
// would train mixed epochs and write checkpoints that pass every later check, so the choice is
// compared across the run's ranks before any step. An older copy of manifest.json in the chosen
// folder is warned about (an error under --strict) on every rank, so that all of them stop together.
#pragma once

#include <cstdint>
#include <string>

#include "train/checkpoint_history.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {


// Collective over `world` (every rank of the run). Rank 0 says which newer checkpoints were
// skipped as damaged. Throws frugal::Error naming the ranks whose choice differs from rank 0's.
CheckpointChoice choose_resume_checkpoint(const std::string& dir, bool accept_unchecked, comm::Communicator& world);

// The comparison alone, for a trainer with checkpoints of its own format (DLRM): every rank of
// `world` resumes epoch `epoch`, step `step` of run `run` (any identifying text, e.g. the folder),
// or every rank throws frugal::Error naming the ranks that differ from rank 0.
void require_same_resume(const std::string& dir, uint64_t epoch, uint64_t step, const std::string& run,
                         comm::Communicator& world);

}  // namespace frugal::train
