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

namespace comm {
class Communicator;
}

// How a Trainer's rank takes part in a run of several ranks. Both groups may be null (one rank).
struct Parallelism {
  // Ranks that slice the model (the layers' Placement must name the same group): every rank of it
  // sees the same batch; activations are all-gathered and their gradients reduce-scattered.
  comm::Communicator* model = nullptr;
  // Replicas of the (sliced) model: each takes its share of every global batch and the replicas
  // sum their gradients. Sparse: only rows some replica touched travel. Dense (the Horovod
  // scheme, the baseline): every parameter in full, every step.
  comm::Communicator* data = nullptr;
  bool dense_gradients = false;
};

struct TrainerOptions {
  optim::Adam optimizer{};
  Parallelism parallel{};
  void validate() const { optimizer.validate(); }
};

struct FitOptions {
  size_t batch = 128;
  uint64_t seed = 1;  // shuffle order of this epoch
  bool shuffle = true;
  bool progress = true;
  std::string label = "train";
  size_t max_steps = 0;  // stop the epoch after this many steps (0: the whole data set)
};

struct FitResult {
  double loss = 0.0;  // mean loss per point
  size_t samples = 0, steps = 0;
  double seconds = 0.0;  // training loop only
  double samples_per_s = 0.0;
  double logits_per_sample = 0.0;  // output neurons computed per point (the active set size)
  // Wire bytes of this rank in the epoch (model- and data-parallel traffic), and the points this
  // rank's model-parallel group processed (its share of the data set under data parallelism).
  uint64_t bytes_sent = 0, bytes_received = 0;
  size_t group_samples = 0;
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
  // One optimizer step on `batch`; returns the summed loss of its points. Under data parallelism
  // `batch` is this replica's share of a global batch of `global_batch` points (0: batch.size()).
  double train_step(const SparseBatch& batch, size_t global_batch = 0);
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
  void set_step(uint64_t step) { step_ = step; }
  const Parallelism& parallel() const { return options_.parallel; }

 private:
  const Tensor& forward_hidden(const SparseBatch& batch);
  // Sliced input layer: all-gathers the slices into full activations (B x H).
  const Tensor& gather_input(const Tensor& local);
  // Sums the output layer's partial input gradient over the model group; returns the gradient of
  // the input layer's own slice.
  const Tensor& input_gradient(const Tensor& partial);
  void sum_gradients_over_replicas();
  uint64_t wire_bytes(bool sent) const;

  Model& model_;
  TrainerOptions options_;
  optim::AdamOptimizer optimizer_;
  std::vector<const Tensor*> activations_;  // input of each hidden layer and of the output layer
  Tensor grad_, gathered_, exchange_, grad_slice_;
  uint64_t step_ = 0, epoch_ = 0;
};

}  // namespace frugal
