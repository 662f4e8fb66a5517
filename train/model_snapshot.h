// A copy of a model's weights and layer states (LSH tables) in host memory, taken after an epoch
// and put back later: how a run without a checkpoint folder keeps its best epoch (train/best_epoch.h).
// This rank's slice only, as the model holds it; the optimizer's state is not kept (the best epoch's
// model is for inference: a run that should continue from it resumes from a checkpoint).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace frugal {
class Model;
}

namespace frugal::train {

class ModelSnapshot {
 public:
  void take(const Model& model);
  // Throws if `model` is not shaped as the one taken.
  void restore(Model& model) const;
  bool empty() const { return values_.empty(); }
  size_t bytes() const;

 private:
  std::vector<std::vector<std::byte>> values_;  // each parameter's value
  std::vector<std::string> layer_states_;
};

}  // namespace frugal::train
