// An epoch trained in parts (Trainer::fit_epoch with skip_steps / end_epoch): what calibrating the
// slice weights (train/run/calibration.h) and scoring the validation set within a long epoch
// (train/run/validation_plan.h) train between their pauses. The parts train what one call would.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dataset.h"
#include "train/trainer.h"

namespace frugal::run {

// `steps` steps of the epoch `epoch` describes (its seed, batch and --max-steps cap) after the first
// `skip` (0 steps: to the end), ending the epoch (counting it, catching rows up) when `end`.
train::FitResult fit_part(train::Trainer& trainer, const data::Dataset& train, const train::FitOptions& epoch,
                          size_t skip, size_t steps, bool end, const char* label);

// --checkpoint-every auto: the points trained between two checkpoints within a long epoch (what
// --valid-every auto scores a 20,000-point split at): a crash or a reclaimed node loses at most this
// much work (minutes on a small node), and a save costs a few seconds in that time.
inline constexpr size_t kAutoCheckpointPoints = 400000;
// The training steps between two checkpoints within an epoch of `steps_per_epoch` steps of `batch`
// points (0: none, at epoch ends only). `given`: --checkpoint-every as given (unset: auto).
size_t checkpoint_every_steps(std::optional<size_t> given, size_t batch, size_t steps_per_epoch);

// Where a run resumed from a checkpoint with `run_state` starts its first epoch: the steps of it the
// checkpoint had done (0: saved at an epoch's end). Refused, naming --resume `resume` and the flag:
// steps of another batch than `batch` (they would skip other points), or as many as an epoch of this
// run has (`steps_per_epoch`: other --max-steps or other data).
size_t resumed_epoch_step(const nlohmann::json& run_state, const std::string& resume, size_t batch,
                          size_t steps_per_epoch);

// The steps of a whole epoch: one per batch, within --max-steps (0: none).
size_t steps_in_epoch(size_t points, size_t batch, size_t max_steps);

}  // namespace frugal::run
