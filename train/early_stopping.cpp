#include "train/early_stopping.h"

namespace frugal::train {

EarlyStopping::EarlyStopping(size_t patience) : patience_(patience) {}

EarlyStopping::EarlyStopping(size_t patience, State state) : patience_(patience), state_(state) {}

bool EarlyStopping::update(uint64_t epoch, double score) {
  if (score > state_.best) {
    state_ = {.best = score, .best_epoch = epoch, .epochs_without_improvement = 0};
    return true;
  }
  ++state_.epochs_without_improvement;
  return false;
}

bool EarlyStopping::should_stop() const { return patience_ > 0 && state_.epochs_without_improvement >= patience_; }

}  // namespace frugal::train
