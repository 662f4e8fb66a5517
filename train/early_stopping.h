// Early stopping on a validation score (higher is better, e.g. P@1 of a held-out split): a run
// stops once `patience` epochs in a row have not improved on the best score. The state is small
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
  };

  explicit EarlyStopping(size_t patience);
  EarlyStopping(size_t patience, State state);
  // Records epoch `epoch`'s score; true when it beats every earlier one (then save the model).
  bool update(uint64_t epoch, double score);
  // patience epochs in a row without improvement (never with patience 0).
  bool should_stop() const;
  const State& state() const { return state_; }
  size_t patience() const { return patience_; }

 private:
  size_t patience_;
  State state_;
};

}  // namespace frugal::train
