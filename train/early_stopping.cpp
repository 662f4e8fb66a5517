#include "train/early_stopping.h"

namespace frugal::train {

EarlyStopping::EarlyStopping(size_t patience) : patience_(patience) {}

EarlyStopping::EarlyStopping(size_t patience, State state) : patience_(patience), state_(state) {}

bool EarlyStopping::update(uint64_t epoch, double score, uint64_t step, bool epoch_end) {
  const bool better = score > state_.best;
  if (better) {
    state_.best = score;
    state_.best_epoch = epoch;
    state_.best_step = epoch_end ? 0 : step;
  }
  if (epoch_end) state_.epochs_without_improvement = state_.best_epoch == epoch ? 0 : state_.epochs_without_improvement + 1;
  return better;
}

bool EarlyStopping::should_stop() const { return patience_ > 0 && state_.epochs_without_improvement >= patience_; }

}  // namespace frugal::train
