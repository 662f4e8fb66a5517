// Trainer: runs training steps (forward, loss, backward, optimizer) and evaluation over a Model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/adam.h"
#include "core/dataset.h"
#include "core/model.h"

namespace frugal {

struct TrainerOptions {
  optim::Adam optimizer{};
  void validate() const { optimizer.validate(); }
};

struct FitOptions {
  size_t batch = 128;
  uint64_t seed = 1;  // shuffle order of this epoch
  bool shuffle = true;
  bool progress = true;
  std::string label = "train";
};

struct FitResult {
  double loss = 0.0;  // mean loss per point
  size_t samples = 0, steps = 0;
  double seconds = 0.0;  // training loop only
  double samples_per_s = 0.0;
  double logits_per_sample = 0.0;  // output neurons computed per point (the active set size)
};

struct EvalOptions {
  std::vector<size_t> k{1, 3, 5};
  size_t batch = 512;
  bool progress = false;
};

struct EvalResult {
  std::map<size_t, double> precision;  // k -> P@k
  size_t samples = 0;
  double seconds = 0.0;
  double p(size_t k) const;
};

class Trainer {
 public:
  Trainer(Model& model, const TrainerOptions& options);
  // One optimizer step on `batch`; returns the summed loss of its points.
  double train_step(const SparseBatch& batch);
  FitResult fit_epoch(const data::Dataset& data, const FitOptions& options);
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& options);
  // Loss of `batch` without changing anything (evaluation and gradient checks).
  double loss(const SparseBatch& batch);

  uint64_t step() const { return step_; }
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  Model& model() { return model_; }
  optim::AdamOptimizer& optimizer() { return optimizer_; }
  const optim::AdamOptimizer& optimizer() const { return optimizer_; }
  void save_state(cereal::BinaryOutputArchive& ar) const;
  void load_state(cereal::BinaryInputArchive& ar);

 private:
  const Tensor& forward_hidden(const SparseBatch& batch);

  Model& model_;
  TrainerOptions options_;
  optim::AdamOptimizer optimizer_;
  std::vector<const Tensor*> activations_;  // input of each hidden layer and of the output layer
  Tensor grad_;
  uint64_t step_ = 0, epoch_ = 0;
};

}  // namespace frugal
