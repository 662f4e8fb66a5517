#include "train/run/epoch_parts.h"

#include <algorithm>
#include <limits>

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

size_t steps_in_epoch(size_t points, size_t batch, size_t max_steps) {
  const size_t steps = batch > 0 ? (points + batch - 1) / batch : 0;
  return max_steps > 0 ? std::min(steps, max_steps) : steps;
}

}  // namespace frugal::run
