// PipelineTrainer: one stage of a pipeline (`frugal train --pipeline S`). The network's layers are
// split into S contiguous stages, one per rank of the pipeline group; a batch is cut into
// micro-batches that flow through the stages in a 1F1B schedule (each stage runs S - 1 - stage
// forward passes ahead, then alternates one forward and one backward, then drains), and every
// stage sums its parameters' gradients over the batch's micro-batches before one optimizer step.
// With one micro-batch the step is the 1-rank step, the same bits; with N, the sum of N partial
// gradients (the same up to the order of the sums). Between stages the activations and their
// gradients travel through a StageLink (comm/exchange.h): DCT-MP's top-k and narrow values when
// compressed.
//
// Layers keep what their backward needs from their last forward pass, so a stage that ran later
// micro-batches' forward passes in between recomputes a micro-batch's forward pass from its saved
// input before its backward (GPipe's re-materialization): the same bits, one more forward pass on
// every stage but the last. Data-parallel replicas of the whole pipeline sum each stage's gradients
// over the replicas of that stage (as Trainer does), thresholded with DCT-DP when asked.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/dataset.h"
#include "comm/exchange.h"
#include "core/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "train/input_dropout.h"
#include "train/divergence.h"
#include "train/trainer.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {


struct PipelineOptions {
  // The stages of this replica, in order (rank s holds stage s); at least 1 rank.
  comm::Communicator* pipeline = nullptr;
  // This stage's replicas (the same stage and slice of every replica of the pipeline); null or 1: none.
  comm::Communicator* data = nullptr;
  // The ranks slicing this stage's layers (`--grid DxMxS`, M > 1; null or 1: the stage whole). The
  // layers' Placement must name it. Inside the stage the activations are all-gathered and their
  // gradients reduce-scattered as a model-parallel Trainer does; every rank of a stage group sends
  // the whole boundary to the same slice of the next stage (rank m to rank m of each pipeline group).
  comm::Communicator* model = nullptr;
  // Micro-batches per batch (the batch's points split as evenly as they go, in order).
  size_t micro_batches = 1;
  // The whole network's layer count: the stage's model holds layers [first_layer, first_layer +
  // model.layers().size()) of it.
  size_t first_layer = 0, total_layers = 0;
  comm::MpCompression boundary{};  // what crosses each stage boundary (default: everything, f32)
  std::optional<comm::DpCompression> dp{};  // DCT-DP between replicas (unset: the touched rows, exact)
  // As Trainer's: by default what --optimizer auto picks for the network (train/trainer.h
  // resolve_automatic; the last stage tells the others whether its output layer is sampled).
  optim::Options optimizer{.method = optim::Method::automatic};
  optim::LrSchedule lr_schedule{};
  float clip_norm = 0.0f;  // of the whole model's gradient (over the stages, after the replicas' sum)
  InputDropout dropout{};
  const comm::ExchangeFactory* exchanges = nullptr;  // null: comm/'s
  OnDivergence on_divergence = OnDivergence::stop;  // skip_batch is refused (train/divergence.h)
  void validate() const;
};

class PipelineTrainer {
 public:
  PipelineTrainer(Model& stage_model, const PipelineOptions& options);
  ~PipelineTrainer();

  int stage() const;
  int stages() const;
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() + 1 == stages(); }

  // One optimizer step on `batch` (this replica's share of a global batch of `global_batch`
  // points; 0: batch.size()). Every stage passes the same batch. Returns the summed loss on the
  // last stage, 0 elsewhere.
  double train_step(const SparseBatch& batch, size_t global_batch = 0);
  // An epoch; the loss, active labels and sample counts are the last stage's, on every stage.
  FitResult fit_epoch(const data::Dataset& data, const FitOptions& options);
  // Test metrics, computed on the last stage and sent to every stage.
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& options);
  // Trainer::init_output_from_centroids through the pipeline (the last stage sets its rows).
  void init_output_from_centroids(const data::Dataset& data, float scale, size_t batch = 512);
  // Trainer::apply_deferred (--update-threshold), at the end of every epoch.
  void apply_deferred();

  uint64_t step() const { return step_; }
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  void set_step(uint64_t step) {
    step_ = step;
    optimizer_->set_steps(step);
  }
  const std::string& run_id() const { return run_id_; }
  void set_run_id(std::string id) { run_id_ = std::move(id); }
  Model& model() { return model_; }
  const Model& model() const { return model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }
  const PipelineOptions& options() const { return options_; }
  // The boundary payload of this stage so far (its links' and, sliced, its group's exchanges'),
  // sent and uncompressed.
  uint64_t boundary_payload(bool sent) const;

 private:
  InputLayer* input() const;
  OutputLayer* output() const;
  // The stage's hidden layers (checked to be dense-to-dense), found once: hidden_.
  std::vector<HiddenLayer*> find_hidden() const;
  const comm::ExchangeFactory& exchanges() const;
  // Forward pass of micro-batch m through this stage: from the data (first stage) or the previous
  // stage; to the next stage (`send`) or, on the last stage, with the loss and the backward pass.
  void forward(size_t m, bool send);
  void backward(size_t m);
  // The last stage: the output layer's loss and backward pass of micro-batch m, then the hidden
  // layers' backward passes and the gradient sent back.
  void last_stage_step(size_t m);
  // Backward through the stage's hidden layers from dLoss/d(stage output) `g` (`partial`: this
  // rank's share of a sum over the stage group), then to the input layer or the previous stage.
  void backward_from(size_t m, const Tensor& g, bool partial);
  // Layer k's output (k: index in the stage's layers) as every rank of the stage group needs it, and
  // dLoss/d(its output) for this rank's neurons (Trainer::exchange_forward / exchange_backward).
  const Tensor& exchange_forward(size_t k, const Tensor& local);
  const Tensor& exchange_backward(size_t k, const Tensor& grad, bool partial);
  void accumulate_gradients();
  // The stage's input of micro-batch m (the previous stage's activations, kept for a recomputation).
  const Tensor& stage_input(size_t m);

  Model& model_;
  PipelineOptions options_;
  std::vector<HiddenLayer*> hidden_;  // the stage's hidden layers, input side first
  std::vector<Parameter*> params_;     // model_.parameters(), in order
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<comm::StageLink> prev_, next_;  // the boundaries before and after this stage (null at the ends)
  std::unique_ptr<comm::ReplicaReducer> reducer_;
  // Per layer of the stage but the output layer: its boundary inside the stage when sliced over an
  // active stage group, else null.
  std::vector<std::unique_ptr<comm::ActivationExchange>> boundaries_;
  Tensor grad_full_;  // a replicated producer's gradient summed over the stage group
  std::vector<SparseBatch> micro_;  // this step's micro-batches
  std::vector<Tensor> inputs_;      // each micro-batch's stage input (not on the first stage)
  std::vector<bool> received_;      // whether it has arrived
  std::vector<const Tensor*> activations_;  // the input of each hidden layer of the stage, and of the output
  // Each parameter's gradients of this step's micro-batches, summed at the step's end (a dense
  // layer's summed as they come).
  std::vector<std::vector<RowGrad>> parts_;
  // Per parameter, gradient buffers of earlier micro-batches to write the next ones into (their
  // memory already touched), and taking one.
  std::vector<std::vector<Tensor>> spare_;
  Tensor spare_buffer(size_t param);
  Tensor grad_;                      // dLoss/d(output layer input) on the last stage
  size_t forwarded_ = SIZE_MAX;      // the micro-batch whose forward pass the layers hold
  float scale_ = 1.0f;               // 1 / global batch
  double step_loss_ = 0.0;
  double last_grad_norm_ = 0.0;  // of the last step, with clip_norm (the whole model's)
  SparseBatch dropped_;
  uint64_t step_ = 0, epoch_ = 0;
  std::string run_id_;
};

}  // namespace frugal::train
