// Early stopping on a validation score (higher is better, e.g. P@1 of a held-out split): a run
// stops once `patience` epochs in a row have not improved on the best score. A long epoch may be
// scored within it too (every N steps, train/run/validation_plan.h): an epoch improved when any of
// its scores beat the best. The state is small
// and plain so a checkpoint can carry it and a resumed run stops where the uninterrupted one would.
#pragma once

#include <cstddef>
#include <cstdint>

namespace frugal::train {

class EarlyStopping {
 public:
  struct State {
    double best = -1.0;  // best score so far (-1: none yet)
    uint64_t best_epoch = 0;
    size_t epochs_without_improvement = 0;
    // The global training step of a best scored within its epoch (0: at the epoch's end).
    uint64_t best_step = 0;
  };

  explicit EarlyStopping(size_t patience);
  EarlyStopping(size_t patience, State state);
  // Records epoch `epoch`'s score; true when it beats every earlier one (then save the model).
  // Within the epoch (`epoch_end` false) at global step `step`: the best may move, the count of
  // epochs without improvement waits for the epoch's end.
  bool update(uint64_t epoch, double score, uint64_t step = 0, bool epoch_end = true);
  // patience epochs in a row without improvement (never with patience 0).
  bool should_stop() const;
  const State& state() const { return state_; }
  size_t patience() const { return patience_; }

 private:
  size_t patience_;
  State state_;
};

}  // namespace frugal::train
