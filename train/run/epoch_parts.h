// An epoch trained in parts (Trainer::fit_epoch with skip_steps / end_epoch): what calibrating the
// slice weights (train/run/calibration.h) and scoring the validation set within a long epoch
// (train/run/validation_plan.h) train between their pauses. The parts train what one call would.
#pragma once

#include <cstddef>

#include "core/dataset.h"
#include "train/trainer.h"

namespace frugal::run {

// `steps` steps of the epoch `epoch` describes (its seed, batch and --max-steps cap) after the first
// `skip` (0 steps: to the end), ending the epoch (counting it, catching rows up) when `end`.
train::FitResult fit_part(train::Trainer& trainer, const data::Dataset& train, const train::FitOptions& epoch,
                          size_t skip, size_t steps, bool end, const char* label);

// The steps of a whole epoch: one per batch, within --max-steps (0: none).
size_t steps_in_epoch(size_t points, size_t batch, size_t max_steps);

}  // namespace frugal::run
