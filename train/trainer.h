// Trainer: runs training steps (forward, loss, backward, optimizer) and evaluation over a Model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "comm/exchange.h"
#include "train/divergence.h"
#include "train/forward_split.h"
#include "train/input_dropout.h"
#include "core/optim/lr_schedule.h"
#include "core/model.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/step_profile.h"
#include "core/optim/optimizer.h"

namespace frugal::data {
template <class Pool>
class BlockStream;
using PointStream = BlockStream<SparseBatch>;
}  // namespace frugal::data

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {

class EnsembleRanker;


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
  // By default what `frugal train --optimizer auto` picks for the model: row-wise Adam at its rate
  // (1e-2) with row-wise state on the label rows of a sampled (LSH) output layer, per-element Adam
  // (1e-3) for an exact softmax (resolve_optimizer). Or optim::Adam{...}, optim::RowwiseAdam{...},
  // optim::Sgd{...} (core/optim/optimizer.h).
  optim::Options optimizer{.method = optim::Method::automatic};
  Parallelism parallel{};
  // DCT-MP: what crosses each sliced-layer boundary of the model group (default: everything, f32).
  comm::MpCompression mp{};
  // DCT-DP: threshold each replica's gradients (error feedback) and exchange only what passes.
  // Unset: replicas exchange every touched row (or, with dense_gradients, everything).
  std::optional<comm::DpCompression> dp{};
  // Evaluation and prediction only (what a Predictor builds): no optimizer state is allocated,
  // which leaves the model's weights as the only copy in memory; train_step refuses to run.
  bool inference_only = false;
  // What makes the exchanges between ranks (comm/exchange.h); null: comm/'s (comm/exchange_factory.h).
  // Only consulted when a group of more than one rank is given.
  const comm::ExchangeFactory* exchanges = nullptr;
  // The learning rate of each step (linear/cosine need lr_schedule.total_steps: epochs x steps).
  optim::LrSchedule lr_schedule{};
  // Scale the gradients so that their global L2 norm (whole model, after the replicas' sum) is at
  // most clip_norm; 0: off.
  float clip_norm = 0.0f;
  // Input-feature dropout in training steps (never in evaluation); p = 0: off.
  InputDropout dropout{};
  // Model-parallel steps overlap the input boundary's gradient exchange with the optimizer: the
  // layers above the input are moved while the reduce-scatter of dLoss/dh is in flight (their
  // gradients are final by then). The same bits as without; it applies where nothing needs every
  // gradient before any update (no replicas' sum, no clipping). Forward passes (with an exact input
  // boundary, where forward_split says so: train/forward_split.h) compute the input layer in
  // two row parts, the first part's all-gather in flight while the second is computed; the same
  // bits too.
  bool overlap = true;
  ForwardSplit forward_split = ForwardSplit::automatic;
  // A step whose loss (or, with clip_norm, gradient norm) is not finite: stop the run, or drop the
  // batch's update (train/divergence.h). skip_batch needs every rank to see the whole batch's loss:
  // it is refused with data-parallel replicas, and it turns overlap off (an overlapped step moves
  // parameters before the loss is known to be finite).
  OnDivergence on_divergence = OnDivergence::stop;
  void validate() const;
};

struct FitOptions {
  size_t batch = 128;
  uint64_t seed = 1;  // shuffle order of this epoch
  bool shuffle = true;
  bool progress = true;
  std::string label = "train";
  size_t max_steps = 0;  // stop the epoch after this many steps (0: the whole data set)
  // A part of an epoch (what calibrating slice weights in the middle of one needs): skip_steps
  // batches of the epoch's order are skipped (they were trained by an earlier part); with
  // end_epoch = false the call neither counts the epoch nor catches rows up, so a later call with
  // skip_steps = the steps done so far continues the same epoch.
  size_t skip_steps = 0;
  bool end_epoch = true;
};

struct FitResult {
  double loss = 0.0;  // mean loss per point
  double loss_sum = 0.0;  // the points' summed loss (loss = loss_sum / samples; parts add exactly)
  size_t samples = 0, steps = 0;
  double seconds = 0.0;  // training loop only
  double samples_per_s = 0.0;
  double labels_scored_per_sample = 0.0;  // output neurons computed per point (the active set size)
  // Wire bytes of this rank in the epoch (model- and data-parallel traffic), and the points this
  // rank's model-parallel group processed (its share of the data set under data parallelism).
  uint64_t bytes_sent = 0, bytes_received = 0;
  size_t group_samples = 0;
  // The same split by group: model-parallel (activations and their gradients, the softmax
  // normalizer) and data-parallel (parameter gradients), bytes sent on the wire.
  uint64_t mp_bytes_sent = 0, dp_bytes_sent = 0;
  // Achieved DCT compression: payload handed to the communicator vs what the uncompressed
  // exchange would hand over (MP: the f32 all-gather / reduce-scatter at sliced boundaries; DP: the
  // dense all-reduce of every parameter). 0/0 when there was no such traffic.
  uint64_t mp_payload_sent = 0, mp_payload_uncompressed = 0;
  uint64_t dp_payload_sent = 0, dp_payload_uncompressed = 0;
  // What the exact touched-rows exchange would have sent instead (ReplicaReducer::payload_touched).
  uint64_t dp_payload_touched = 0;
  // Rows of each parameter (model.parameters() order) that had a gradient, summed over the steps,
  // before any data-parallel exchange: what a replica touches per step, the input of `frugal plan`'s
  // model of the touched-rows exchange.
  std::vector<uint64_t> touched_rows;
  // Bytes that crossed between the host and this rank's compute device in the training steps
  // (Backend::transfers(): set / get and ops' staging of host arguments); 0 on the CPU backend.
  uint64_t host_device_bytes = 0;
  // With clip_norm: the mean global gradient norm before clipping, and the steps it clipped.
  double grad_norm = 0.0;
  size_t clipped_steps = 0;
  // Steps whose loss was not finite (train/divergence.h): the first one's 1-based step of the epoch
  // (0: none), and with OnDivergence::skip_batch how many were skipped.
  size_t diverged_step = 0, skipped_batches = 0;
  // Compute time of this rank's steps, summed: each step's wall time minus the time this thread
  // waited for communication in it (comm::waited_seconds), so a rank's own speed shows whatever
  // its peers do. step_seconds() is the mean per step.
  double compute_seconds = 0.0;
  double step_seconds() const { return steps > 0 ? compute_seconds / static_cast<double>(steps) : 0.0; }
  // Where this rank's training steps spent their time, and the work each phase did
  // (core/step_profile.h): the epoch's part of the thread's totals.
  profile::StepProfile profile;
  // Appends the result of a later part of the same epoch (FitOptions::skip_steps): sums, and means
  // weighted by points or steps.
  void merge(const FitResult& later);
  // host_device_bytes per point of this rank's group (the metrics log's host_device_bytes_per_sample).
  double host_device_bytes_per_sample() const {
    return group_samples > 0 ? static_cast<double>(host_device_bytes) / static_cast<double>(group_samples) : 0.0;
  }
  double mp_compression() const;
  double dp_compression() const;
};

struct EvalOptions {
  std::vector<size_t> k{1, 3, 5};
  size_t batch = 512;
  bool progress = false;
  // exact: every label is scored (P@k exact whichever sampler trained); lsh: only the labels the
  // output layer's LSH tables return for each point.
  Inference inference = Inference::exact;
  size_t inference_candidates = InferenceOptions{}.candidates;  // LSH: labels scored per point at most
  // Propensities from the training label counts (not owned): with them, PSP@k and PSnDCG@k are
  // computed too; without, they are left out.
  const Propensities* propensities = nullptr;
  // --infer ensemble (not owned): the network's `candidates` best labels blended with the label
  // centroids' (train/ensemble_ranker.h); null: the network's ranking as `inference` makes it.
  const EnsembleRanker* ensemble = nullptr;
};

// P@k (`precision`, `p(k)`), nDCG@k, recall@k, coverage@k and, with propensities, PSP@k and
// PSnDCG@k (core/ranking_metrics.h defines them).
struct EvalResult : RankingScores {
  size_t samples = 0;
  double seconds = 0.0;
  double labels_scored_per_sample = 0.0;  // on this rank's slice of the output layer
  double p(size_t k) const;
};

// `options` with an automatic optimizer resolved for `model` (TrainerOptions::optimizer). An
// automatic optimizer whose other fields were set is refused: what they tune depends on the method.
TrainerOptions resolve_optimizer(TrainerOptions options, const Model& model);
// What an automatic optimizer becomes (`optimizer` itself otherwise): row-wise Adam with per-row state
// on the label rows when the network's output layer is sampled (LSH), Adam otherwise. The one choice
// of every trainer (Trainer, PipelineTrainer) and of `frugal train --optimizer auto`.
optim::Options resolve_automatic(const optim::Options& optimizer, bool sampled_output);

class Trainer {
 public:
  Trainer(Model& model, const TrainerOptions& options);
  // One optimizer step on `batch`; returns the summed loss of its points. Under data parallelism
  // `batch` is this replica's share of a global batch of `global_batch` points (0: batch.size()).
  double train_step(const SparseBatch& batch, size_t global_batch = 0);
  // The forward and backward half of train_step: fills every parameter's gradient (of the loss
  // divided by global_batch) on this rank, before any sum over replicas; returns the summed loss.
  // With dropout it trains on the dropped batch; with catch-up rows it first brings the rows the
  // batch reads (its features', its true labels') up to date, as dense training would have them.
  double compute_gradients(const SparseBatch& batch, size_t global_batch = 0);
  FitResult fit_epoch(const data::Dataset& data, const FitOptions& options);
  // The same over a stream of a packed file (core/data/point_stream.h: this rank's part of each
  // global batch as it reads its blocks; options.skip_steps and max_steps count its batches, its
  // seed is the stream's). `label_counts`: the points of each label over the whole streamed set (the
  // stream never holds it), for sampled negatives.
  FitResult fit_stream(data::PointStream& stream, std::span<const uint32_t> label_counts, const FitOptions& options);
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& options);
  // Sets the output layer's rows to its labels' centroids in hidden space (OutputLayer::
  // accumulate_centroids): one forward pass over all of `data` on every rank (replicas too, so they
  // agree). `scale` is the logit a point gets from a centroid pointing its way, relative to the RMS
  // norm of the hidden vectors.
  void init_output_from_centroids(const data::Dataset& data, float scale, size_t batch = 512);
  // The same over the batches `next` fills until it returns false (a streamed set: its blocks in
  // file order, in batches; every rank of the model group passes the same batches).
  void init_output_from_centroids(const std::function<bool(SparseBatch&)>& next, float scale);
  // The k best labels of every point of `batch` over all labels, best first, with their logits
  // (batch.size() x min(k, labels), row-major). Collective over the model-parallel group: every
  // rank passes the same batch and gets the same merged result.
  void predict(const SparseBatch& batch, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores);
  // Loss of `batch` without changing anything (evaluation and gradient checks).
  double loss(const SparseBatch& batch);

  // Catch-up rows (optim::SparseUpdates::catchup): gives every row the steps it missed, so the
  // weights are those of the dense optimizer now. fit_epoch calls it at the end of every epoch
  // (evaluation and checkpoints see caught-up weights); call it before evaluating mid-epoch.
  void catch_up();
  // --update-threshold (optim::Options::update_threshold): applies every deferred row's residual
  // (Optimizer::apply_deferred) and tells the layers which rows moved. fit_epoch calls it at the end
  // of every epoch, before catch_up; a reslice calls it before saving.
  void apply_deferred();

  uint64_t step() const { return step_; }
  // Steps whose optimizer overlapped the input boundary's gradient exchange (TrainerOptions::overlap).
  uint64_t overlapped_steps() const { return overlapped_steps_; }
  // Forward passes (training and evaluation) whose input boundary's all-gather went in two row
  // parts, the first travelling while the input layer computed the second (TrainerOptions::overlap).
  uint64_t split_gathers() const { return split_gathers_; }
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  // The run this trainer belongs to (16 hex digits, random at construction, taken over from the
  // checkpoint a run resumes): checkpoint manifests name it, so that a manifest copied from another
  // run or an older epoch is told apart.
  const std::string& run_id() const { return run_id_; }
  void set_run_id(std::string id) { run_id_ = std::move(id); }
  Model& model() { return model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }
  void set_step(uint64_t step) {
    step_ = step;
    optimizer_->set_steps(step);
  }
  const Parallelism& parallel() const { return options_.parallel; }
  const TrainerOptions& options() const { return options_; }
  // How the replicas sum their gradients (null without an active data-parallel group). Checkpoints
  // save and restore its error feedback (DCT-DP's residuals).
  comm::ReplicaReducer* reducer() { return reducer_.get(); }
  const comm::ReplicaReducer* reducer() const { return reducer_.get(); }
  // Whether there is error-feedback state to checkpoint (DCT-DP over active replicas).
  bool has_feedback_state() const { return reducer_ != nullptr && reducer_->feedback_states() > 0; }

 private:
  // fit_epoch's and fit_stream's epoch: `loader` (data::BatchLoader or data::PointStream) gives this
  // replica's parts of `points` points.
  template <class Loader>
  FitResult fit_with(Loader& loader, size_t points, const FitOptions& options);

  const comm::ExchangeFactory& exchanges() const;
  const Tensor& forward_hidden(const SparseBatch& batch);
  // The output of layer `producer` (0: input layer, i: hidden layer i-1) as every rank needs it:
  // all-gathered (DCT-MP: top-k) when the layer is sliced.
  const Tensor& exchange_forward(size_t producer, const Tensor& local);
  // The input layer's output as every rank needs it: with TrainerOptions::overlap, an exact sliced
  // boundary and a split that pays (TrainerOptions::forward_split), computed and all-gathered in two
  // row parts that overlap; else whole.
  const Tensor& input_forward_exchanged(const SparseBatch& batch);
  // dLoss/d(output of `producer`) for this rank's neurons, from the consumer's gradient of the
  // whole output: a share of the group's sum when the consumer is sliced (`partial`), else the sum.
  const Tensor& exchange_backward(size_t producer, const Tensor& grad, bool partial);
  uint64_t mp_payload(bool sent) const;
  uint64_t dp_payload(bool sent) const;
  // Bytes crossed so far between the host and the backends the model and optimizer compute on.
  uint64_t host_device_bytes() const;

  // compute_gradients' input after dropout: `batch` itself without dropout.
  const SparseBatch& dropped(const SparseBatch& batch);
  // Catch-up rows: brings the rows the forward pass of `batch` reads (its features' input rows,
  // its true labels' output rows) up to date first, so they are used as dense training has them.
  void catch_up_read_rows(const SparseBatch& batch);
  // The policy of this trainer's epoch loop (train/divergence.h).
  DivergencePolicy divergence_policy() const;
  // OnDivergence::skip_batch: whether the step's loss or any gradient is not finite, on any rank of
  // the model group (collective over it); then drop_gradients drops every parameter's gradient.
  bool step_diverged(double loss) const;
  void drop_gradients();
  // Every parameter's gradient values in host memory (a get per parameter computed on a device).
  void gradients_to_host();
  // DpTarget::updates: the optimizer steps on this replica's own gradient, and the replicas
  // exchange (thresholded, with error feedback) and average the weight changes it made.
  void step_on_exchanged_updates();

  Model& model_;
  TrainerOptions options_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::vector<const Tensor*> activations_;  // input of each hidden layer and of the output layer
  // Per producing layer (input, hidden...): its boundary when sliced over an active group, else null.
  std::vector<std::unique_ptr<comm::ActivationExchange>> boundaries_;
  // The sum over data-parallel replicas (null without an active data-parallel group).
  std::unique_ptr<comm::ReplicaReducer> reducer_;
  Tensor grad_, grad_full_;
  Tensor wire_copy_;  // the host copy of a device activation or gradient that an exchange sends
  std::vector<Tensor> before_update_;
  std::vector<uint64_t> touched_rows_;  // FitResult::touched_rows since this trainer was made
  // TrainerOptions::overlap: train_step lets compute_gradients begin the optimizer's step at the input
  // boundary (early_step_); the parameters it moved there are marked in stepped_.
  bool early_step_ = false;
  std::vector<bool> stepped_;
  uint64_t split_gathers_ = 0;     // split_gathers()
  size_t widest_input_slice_ = 0;  // of the input layer's slices over the model group
  uint64_t overlapped_steps_ = 0;  // overlapped_steps()
  SparseBatch dropped_;
  std::vector<uint32_t> read_rows_;
  uint64_t step_ = 0, epoch_ = 0;
  std::string run_id_;
  double last_grad_norm_ = 0.0;  // of the last step, with clip_norm
  double last_clip_limit_ = 0.0;  // what it was clipped to (clip_norm, or its local share)
};

}  // namespace frugal::train
