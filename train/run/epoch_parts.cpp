#include "train/run/epoch_parts.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/check.h"
#include "train/best_epoch.h"

namespace frugal::run {

train::FitResult fit_part(train::Trainer& trainer, const data::Dataset& train, const train::FitOptions& epoch,
                          size_t skip, size_t steps, bool end, const char* label) {
  train::FitOptions o = epoch;
  o.skip_steps = skip;
  o.end_epoch = end;
  o.label = label;
  o.max_steps = steps;
  if (epoch.max_steps > 0) {
    const size_t left = epoch.max_steps > skip ? epoch.max_steps - skip : 0;
    o.max_steps = steps == 0 ? left : std::min(steps, left);
    if (left == 0) o.skip_steps = std::numeric_limits<size_t>::max();  // nothing left: skip every batch
  }
  return trainer.fit_epoch(train, o);
}

size_t checkpoint_every_steps(std::optional<size_t> given, size_t batch, size_t steps_per_epoch) {
  if (batch == 0) return 0;
  const size_t every = given.value_or((kAutoCheckpointPoints + batch - 1) / batch);
  return every < steps_per_epoch ? every : 0;
}

size_t resumed_epoch_step(const nlohmann::json& run_state, const std::string& resume, size_t batch,
                          size_t steps_per_epoch) {
  const size_t step = train::epoch_step_of(run_state);
  if (step == 0) return 0;
  const size_t saved_batch = train::epoch_batch_of(run_state);
  FRUGAL_CHECK(saved_batch == 0 || saved_batch == batch,
               fmt::format("--resume {}: the checkpoint was saved {} steps of --batch {} into an epoch; resume it with "
                           "--batch {} (another batch can go on from an epoch's end)", resume, step, saved_batch,
                           saved_batch));
  FRUGAL_CHECK(step < steps_per_epoch,
               fmt::format("--resume {}: the checkpoint was saved {} steps into an epoch, but an epoch of this run has "
                           "{} (another --max-steps than the saved run's, or other data)", resume, step, steps_per_epoch));
  return step;
}

size_t steps_in_epoch(size_t points, size_t batch, size_t max_steps) {
  const size_t steps = batch > 0 ? (points + batch - 1) / batch : 0;
  return max_steps > 0 ? std::min(steps, max_steps) : steps;
}

}  // namespace frugal::run
