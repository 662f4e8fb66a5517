#include "train/trainer.h"

#include "train/ensemble_ranker.h"
#include "train/epoch_run.h"

#include <algorithm>
#include <random>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/communicator.h"
#include "core/data/batch_loader.h"
#include "core/data/point_stream.h"
#include "core/check.h"
#include "comm/exchange_factory.h"
#include "train/gradient_clipping.h"
#include "train/ranking_counter.h"
#include "core/metrics.h"
#include "core/parallel_rows.h"
#include "core/progress.h"
#include "core/rng.h"

namespace frugal::train {

double EvalResult::p(size_t k) const {
  const auto it = precision.find(k);
  FRUGAL_CHECK(it != precision.end(), fmt::format("P@{} was not evaluated", k));
  return it->second;
}

double FitResult::mp_compression() const {
  return mp_payload_sent > 0 ? static_cast<double>(mp_payload_uncompressed) / static_cast<double>(mp_payload_sent) : 0.0;
}

void FitResult::merge(const FitResult& later) {
  const auto weighted = [](double a, double wa, double b, double wb) { return wa + wb > 0 ? (a * wa + b * wb) / (wa + wb) : 0.0; };
  loss_sum += later.loss_sum;
  loss = samples + later.samples > 0 ? loss_sum / static_cast<double>(samples + later.samples) : 0.0;
  labels_scored_per_sample = weighted(labels_scored_per_sample, static_cast<double>(group_samples),
                                      later.labels_scored_per_sample, static_cast<double>(later.group_samples));
  grad_norm = weighted(grad_norm, static_cast<double>(steps), later.grad_norm, static_cast<double>(later.steps));
  samples += later.samples;
  steps += later.steps;
  seconds += later.seconds;
  samples_per_s = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  bytes_sent += later.bytes_sent;
  bytes_received += later.bytes_received;
  group_samples += later.group_samples;
  mp_bytes_sent += later.mp_bytes_sent;
  dp_bytes_sent += later.dp_bytes_sent;
  mp_payload_sent += later.mp_payload_sent;
  mp_payload_uncompressed += later.mp_payload_uncompressed;
  dp_payload_sent += later.dp_payload_sent;
  dp_payload_uncompressed += later.dp_payload_uncompressed;
  dp_payload_touched += later.dp_payload_touched;
  host_device_bytes += later.host_device_bytes;
  if (touched_rows.size() < later.touched_rows.size()) touched_rows.resize(later.touched_rows.size(), 0);
  for (size_t i = 0; i < later.touched_rows.size(); ++i) touched_rows[i] += later.touched_rows[i];
  clipped_steps += later.clipped_steps;
  if (diverged_step == 0 && later.diverged_step != 0) diverged_step = later.diverged_step;
  skipped_batches += later.skipped_batches;
  compute_seconds += later.compute_seconds;
  profile += later.profile;
}

double FitResult::dp_compression() const {
  return dp_payload_sent > 0 ? static_cast<double>(dp_payload_uncompressed) / static_cast<double>(dp_payload_sent) : 0.0;
}

void TrainerOptions::validate() const {
  optimizer.validate();
  lr_schedule.validate();
  dropout.validate();
  FRUGAL_CHECK(clip_norm >= 0 && std::isfinite(clip_norm),
               fmt::format("clip_norm must be >= 0 (0: off), got {}", clip_norm));
  mp.validate();
  FRUGAL_CHECK(on_divergence == OnDivergence::stop || !comm::is_active(parallel.data),
               "--on-divergence skip-batch drops a diverged batch's update on every rank of one model group; with "
               "data-parallel replicas each holds a share of the batch (use --on-divergence stop)");
  if (dp) {
    dp->validate();
    FRUGAL_CHECK(!parallel.dense_gradients, "DCT-DP thresholds (TrainerOptions::dp) contradict the dense "
                                            "all-reduce (TrainerOptions::parallel.dense_gradients): choose one");
    FRUGAL_CHECK(!dp->momentum_correction ||
                     (optimizer.method == optim::Method::adam && optimizer.beta1 > 0) ||
                     (optimizer.method == optim::Method::rowwise_adam && optimizer.beta1 > 0 &&
                      optimizer.rowwise_momentum) ||
                     (optimizer.method == optim::Method::sgd && optimizer.momentum > 0),
                 fmt::format("DCT-DP momentum correction moves the optimizer's momentum into the thresholders: {} "
                             "has none (use adam with beta1 > 0 or sgd with momentum > 0)",
                             optim::to_string(optimizer.method)));
    FRUGAL_CHECK(!dp->local_clipping || clip_norm > 0, "DCT-DP local clipping clips each replica's gradient to "
                                                       "clip_norm / sqrt(replicas): it needs clip_norm > 0");
    // Catch-up moves rows from each replica's own optimizer state before they are read, which
    // under exchanged updates differs between replicas: their weights would drift apart.
    FRUGAL_CHECK(dp->target != comm::DpTarget::updates || optimizer.updates == optim::SparseUpdates::lazy,
                 "DCT-DP over optimizer updates (--dp-compress updates) needs lazy sparse updates: catch-up would "
                 "move each replica's rows by its own optimizer state (use --sparse-updates lazy or "
                 "--dp-compress gradients)");
  }
}

namespace {
using comm::is_active;

bool momentum_corrected(const TrainerOptions& o) {
  return o.dp && o.dp->momentum_correction && is_active(o.parallel.data) && !o.inference_only;
}

// DGC's momentum correction moves the optimizer's momentum into the DCT-DP thresholders
// (DpCompression::momentum_correction): the optimizer itself then steps without it.
optim::Options stepping_optimizer(const TrainerOptions& o) {
  optim::Options opt = o.optimizer;
  if (momentum_corrected(o)) {
    opt.beta1 = 0.0f;
    opt.momentum = 0.0f;
  }
  return opt;
}
// Bytes a group has put on and taken off the wire so far (none for a missing group).
comm::ByteCount traffic(const comm::Communicator* c) { return c != nullptr ? c->stats().total() : comm::ByteCount{}; }
// Point-to-point tag of the boundary after producing layer i (comm tags are per source rank).
constexpr int kBoundaryTag = 0x4d50;
}  // namespace

optim::Options resolve_automatic(const optim::Options& optimizer, bool sampled_output) {
  if (optimizer.method != optim::Method::automatic) return optimizer;
  FRUGAL_CHECK(optimizer == optim::Options{.method = optim::Method::automatic},
               "the automatic optimizer takes no settings of its own: name a method to tune it "
               "(optim::RowwiseAdam{.lr = ...}, optim::Adam{.lr = ...})");
  return sampled_output ? optim::Options(optim::RowwiseAdam{.rowwise_input = false}) : optim::Options(optim::Adam{});
}

TrainerOptions resolve_optimizer(TrainerOptions options, const Model& model) {
  if (options.optimizer.method != optim::Method::automatic) return options;
  options.optimizer = resolve_automatic(options.optimizer, model.output().sampled());
  return options;
}

Trainer::Trainer(Model& model, const TrainerOptions& options)
    : model_(model),
      options_(resolve_optimizer(options, model)),
      optimizer_(optim::Optimizer::create(
          stepping_optimizer(options_),
          (model.validate(), options.inference_only ? std::vector<Parameter*>{} : model.parameters()),
          options.lr_schedule)) {
  options_.validate();
  run_id_ = fmt::format("{:016x}", (uint64_t{std::random_device{}()} << 32) | std::random_device{}());
  // The optimizer updates the parameters where the model computes: its state goes there too.
  optimizer_->set_backend(&model_.output().backend());
  comm::Communicator* group = options_.parallel.model;
  if (is_active(group))
    // The gradient sums over the group assume each rank holds a different block of the labels.
    FRUGAL_CHECK(model_.output().placement().group == group && model_.output().placement().is_sliced(),
                 "a model-parallel trainer needs the output layer sliced over the same group (Placement::sliced)");
  std::vector<const Layer*> producers{&model_.input()};
  for (const HiddenLayer* h : model_.hidden()) producers.push_back(h);
  for (size_t i = 0; i < producers.size(); ++i) {
    const Placement& pl = producers[i]->placement();
    if (!pl.is_sliced()) {
      boundaries_.push_back(nullptr);
      continue;
    }
    FRUGAL_CHECK(pl.group == group, fmt::format("layer {} ({}) is sliced over a group other than the trainer's "
                                                "model-parallel group",
                                                i, producers[i]->kind()));
    if (i == 0) {  // the automatic forward split's measure (input_forward_exchanged)
      const auto bounds = pl.bounds(producers[i]->out_features());
      for (size_t r = 0; r + 1 < bounds.size(); ++r)
        widest_input_slice_ = std::max(widest_input_slice_, bounds[r + 1] - bounds[r]);
    }
    comm::MpCompression mp = options_.mp;
    if (i > 0 && mp.straight_through == comm::StraightThrough::input) mp.straight_through = comm::StraightThrough::off;
    boundaries_.push_back(exchanges().activation_exchange(pl, producers[i]->out_features(), mp,
                                                          kBoundaryTag + static_cast<int>(i)));
  }
  comm::Communicator* replicas = options_.parallel.data;
  if (is_active(replicas) && !options_.inference_only) {
    comm::ReducerOptions o;
    o.mode = options_.dp ? comm::ReduceMode::thresholded
                         : options_.parallel.dense_gradients ? comm::ReduceMode::dense : comm::ReduceMode::touched_rows;
    if (options_.dp) o.dp = *options_.dp;
    if (momentum_corrected(options_)) {
      const bool adam = options_.optimizer.method == optim::Method::adam;
      o.dp.momentum = adam ? options_.optimizer.beta1 : options_.optimizer.momentum;
      o.dp.momentum_scale = adam ? 1.0f - options_.optimizer.beta1 : 1.0f;
    }
    reducer_ = exchanges().replica_reducer(*replicas, model_.parameters(), o);
  }
}

const comm::ExchangeFactory& Trainer::exchanges() const {
  return options_.exchanges != nullptr ? *options_.exchanges : comm::comm_exchanges();
}

// The exchanges take host memory (the wire): an activation or gradient on a device comes down
// first, one get where data leaves the step; what arrives is host memory the next op reads.
const Tensor& Trainer::exchange_forward(size_t producer, const Tensor& local) {
  return boundaries_[producer] ? boundaries_[producer]->gather(host_view(local, wire_copy_)) : local;
}

const Tensor& Trainer::exchange_backward(size_t producer, const Tensor& grad_here, bool partial) {
  if (boundaries_[producer]) {
    const Tensor& grad = host_view(grad_here, wire_copy_);
    return partial ? boundaries_[producer]->reduce_scatter(grad) : boundaries_[producer]->own_slice(grad);
  }
  if (!partial) return grad_here;
  // A replicated layer feeding a sliced one: every rank needs the whole sum.
  grad_full_ = to_host(grad_here);
  options_.parallel.model->all_reduce(grad_full_.span()).wait();
  return grad_full_;
}

uint64_t Trainer::dp_payload(bool sent) const {
  if (!reducer_) return 0;
  return sent ? reducer_->payload_sent() : reducer_->payload_uncompressed();
}

uint64_t Trainer::mp_payload(bool sent) const {
  uint64_t total = 0;
  for (const auto& b : boundaries_)
    if (b) total += sent ? b->payload_sent() : b->payload_uncompressed();
  return total;
}

const Tensor& Trainer::forward_hidden(const SparseBatch& batch) {
  activations_.clear();
  for (const auto& b : boundaries_)
    if (b) b->set_step(step_);
  const Tensor* h = &input_forward_exchanged(batch);
  const auto hidden = model_.hidden();
  for (size_t i = 0; i < hidden.size(); ++i) {
    activations_.push_back(h);
    h = &exchange_forward(i + 1, hidden[i]->forward(*h));
  }
  activations_.push_back(h);
  return *h;
}

const Tensor& Trainer::input_forward_exchanged(const SparseBatch& batch) {
  comm::ActivationExchange* boundary = boundaries_[0].get();
  const size_t rows = batch.size();
  // Two parts: the first half's all-gather travels while the second half is computed. More parts
  // would hide more of the input layer, but each adds a collective's latency (bench/REPORT.md).
  constexpr size_t kParts = 2;
  // A device rank's parts would come down one by one for the host's wire: it gathers whole.
  bool split = options_.overlap && boundary != nullptr && boundary->gathers_in_parts() && rows >= kParts &&
               options_.forward_split != ForwardSplit::never && model_.input().backend().device().is_host();
  if (split && options_.forward_split == ForwardSplit::automatic) {
    // Every model rank has the same batch and slice bounds, so every rank decides alike.
    const double half = static_cast<double>(batch.feature_ids.size()) / kParts * static_cast<double>(widest_input_slice_);
    split = forward_split_pays(half);
  }
  if (!split) return exchange_forward(0, model_.input().forward(batch));
  const Tensor* local = nullptr;
  try {
    for (size_t p = 0; p < kParts; ++p) {
      const size_t first = rows * p / kParts, end = rows * (p + 1) / kParts;
      local = &model_.input().forward_rows(batch, first, end - first);
      boundary->gather_rows(*local, first, end - first);
    }
  } catch (...) {
    boundary->abandon_gather();  // no collective may still read the layer's output or the exchange
    throw;
  }
  ++split_gathers_;
  return boundary->finish_gather(*local);
}

const SparseBatch& Trainer::dropped(const SparseBatch& batch) {
  if (options_.dropout.p <= 0.0f) return batch;
  // Replica d's points are the global batch's d, d + D, ... (the loader's sharding).
  const comm::Communicator* replicas = options_.parallel.data;
  const bool sharded = is_active(replicas);
  drop_input_features(batch, options_.dropout, step_, sharded ? replicas->rank() : 0, sharded ? replicas->size() : 1,
                      dropped_);
  return dropped_;
}

void Trainer::catch_up_read_rows(const SparseBatch& batch) {
  if (options_.optimizer.updates != optim::SparseUpdates::catchup) return;
  const auto catch_up = [&](Parameter* p) {
    std::sort(read_rows_.begin(), read_rows_.end());
    read_rows_.erase(std::unique(read_rows_.begin(), read_rows_.end()), read_rows_.end());
    optimizer_->catch_up_rows(*p, read_rows_);
  };
  for (Parameter* p : model_.input().feature_parameters()) {
    read_rows_.clear();
    for (const uint32_t f : batch.feature_ids)  // an id out of range is the forward pass's error to report
      if (f < p->value.rows()) read_rows_.push_back(f);
    catch_up(p);
  }
  // Label rows the sampler adds (LSH candidates, random negatives) are caught up in the optimizer
  // step, after this forward pass has read them.
  for (Parameter* p : model_.output().label_parameters()) {
    read_rows_.clear();
    const size_t first = p->sliced_axis == 0 ? p->offset : 0, end = first + p->value.rows();
    for (const uint32_t l : batch.label_ids)
      if (l >= first && l < end) read_rows_.push_back(static_cast<uint32_t>(l - first));
    catch_up(p);
  }
}

double Trainer::compute_gradients(const SparseBatch& full_batch, size_t global_batch) {
  const SparseBatch& batch = dropped(full_batch);
  catch_up_read_rows(batch);
  const Tensor& h = forward_hidden(batch);
  // The loss is a sum over points; Adam is invariant to the gradient's scale, but the mean keeps
  // gradients comparable across batch sizes (as in the PyTorch baseline). Replicas scale by the
  // global batch, so their summed gradients are the global batch's mean. The output layer applies
  // the scale to dLoss/dz: a pass over the output rows' gradients (~2.4M floats a step per rank
  // at 4 ranks and 100k labels) took 2-4% of the step.
  if (global_batch == 0) global_batch = batch.size();
  const float scale = global_batch > 0 ? 1.0f / static_cast<float>(global_batch) : 0.0f;
  keep_on(grad_, model_.output().backend());  // dLoss/dh is written where the output layer computes
  const double loss = model_.output().forward_backward(h, batch, step_, &grad_, scale);
  // Walk back through the producing layers; a sliced consumer's input gradient is its share only.
  const auto hidden = model_.hidden();
  const Tensor* g = &grad_;
  bool partial = is_active(options_.parallel.model);
  for (size_t j = hidden.size(); j-- > 0;) {
    const Tensor& local = exchange_backward(j + 1, *g, partial);
    g = &hidden[j]->backward(*activations_[j], local);
    partial = boundaries_[j + 1] != nullptr;
  }
  if (early_step_ && partial && boundaries_[0]) {
    // Every gradient but the input layer's is final: move those parameters while dLoss/dh travels.
    // The wire reads host memory until finish_reduce_scatter: wire_copy_ holds a device's copy.
    boundaries_[0]->start_reduce_scatter(host_view(*g, wire_copy_));
    optimizer_->begin_step();
    const std::vector<Parameter*> params = model_.parameters();
    const std::vector<Parameter*> input = model_.input().parameters();
    stepped_.assign(params.size(), false);
    for (size_t i = 0; i < params.size(); ++i) {
      if (std::find(input.begin(), input.end(), params[i]) != input.end()) continue;
      optimizer_->step_parameter(optimizer_->index_of(params[i]));
      stepped_[i] = true;
    }
    model_.input().backward(batch, boundaries_[0]->finish_reduce_scatter());
    return loss;
  }
  model_.input().backward(batch, exchange_backward(0, *g, partial));
  return loss;
}

double Trainer::train_step(const SparseBatch& batch, size_t global_batch) {
  FRUGAL_CHECK(!options_.inference_only, "this trainer was made for inference only (TrainerOptions::inference_only)");
  // What no phase of its own claims (gradient scaling, catch-up of read rows, exchanges' packing).
  const profile::Scope phase(profile::Phase::other);
  // The optimizer may begin at the input boundary only where no step needs every gradient first.
  early_step_ = options_.overlap && !reducer_ && options_.clip_norm <= 0.0f && is_active(options_.parallel.model) &&
                options_.on_divergence == OnDivergence::stop;
  stepped_.clear();
  double loss = 0.0;
  try {
    loss = compute_gradients(batch, global_batch);
  } catch (...) {
    early_step_ = false;
    throw;
  }
  early_step_ = false;
  if (options_.on_divergence == OnDivergence::skip_batch && step_diverged(loss)) {
    drop_gradients();  // nothing has moved: the batch leaves no trace (run_steps counts it skipped)
    return std::isfinite(loss) ? std::nan("") : loss;
  }
  const std::vector<Parameter*> params = model_.parameters();
  touched_rows_.resize(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) touched_rows_[i] += params[i]->grad.num_rows();
  if (!stepped_.empty()) {  // begun in compute_gradients: the input layer's parameters are left
    last_clip_limit_ = options_.clip_norm;
    for (size_t i = 0; i < params.size(); ++i)
      if (!stepped_[i]) optimizer_->step_parameter(optimizer_->index_of(params[i]));
    optimizer_->end_step();
    stepped_.clear();
    ++overlapped_steps_;
  } else if (reducer_ && options_.dp && options_.dp->target == comm::DpTarget::updates) {
    step_on_exchanged_updates();
  } else {
    // The replicas' exchange reads and writes host memory (the wire): a device's gradients come down.
    if (reducer_) gradients_to_host();
    // DGC's local clipping: each replica's own gradient, before error feedback holds any of it.
    const bool local_clip = reducer_ && options_.dp && options_.dp->local_clipping && options_.clip_norm > 0.0f;
    last_clip_limit_ = options_.clip_norm;
    if (local_clip) {
      last_clip_limit_ = options_.clip_norm / std::sqrt(static_cast<double>(options_.parallel.data->size()));
      last_grad_norm_ = clip_gradient_norm(model_.parameters(), static_cast<float>(last_clip_limit_),
                                           options_.parallel.model);
    }
    if (reducer_) reducer_->reduce();
    if (options_.clip_norm > 0.0f && !local_clip)
      last_grad_norm_ = clip_gradient_norm(model_.parameters(), options_.clip_norm, options_.parallel.model);
    // The norm is the model group's (after the replicas' sum): every rank sees the same value.
    if (options_.clip_norm > 0.0f && !std::isfinite(last_grad_norm_)) {
      if (options_.on_divergence == OnDivergence::skip_batch) {
        drop_gradients();
        return std::nan("");
      }
      throw_divergence(divergence_where(epoch_ + 1, 0) + fmt::format(" (optimizer step {})", step_ + 1),
                       "gradient norm", last_grad_norm_, optimizer_->lr(step_ + 1));
    }
    optimizer_->step();
  }
  ++step_;
  for (const auto& layer : model_.layers()) layer->after_update(step_);
  return loss;
}

void Trainer::gradients_to_host() {
  for (Parameter* p : model_.parameters()) {
    if (!p->grad.values.is_host()) p->grad.values = to_host(p->grad.values);
    p->grad.fetch_rows();  // the rows a device kept (RowGrad::rows_on_device) come down with them
  }
}

void Trainer::step_on_exchanged_updates() {
  for (const Parameter* p : model_.parameters())
    FRUGAL_CHECK(p->value.is_host(),
                 fmt::format("DCT-DP over optimizer updates (--dp-compress updates) changes the weights on the host, "
                             "but parameter {} lives on {}: use --dp-compress gradients on this device",
                             p->name, p->value.device().name()));
  gradients_to_host();
  // The gradients are this replica's share of the global batch's mean (scaled by the global
  // batch): clipping sees the local norm, and the optimizer's moments follow the local gradient.
  last_clip_limit_ = options_.clip_norm;
  if (options_.clip_norm > 0.0f)
    last_grad_norm_ = clip_gradient_norm(model_.parameters(), options_.clip_norm, options_.parallel.model);
  const std::vector<Parameter*> params = model_.parameters();
  before_update_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    Tensor& before = before_update_[i];
    before.resize(p.grad.rows.size(), p.value.cols());
    for (size_t k = 0; k < p.grad.rows.size(); ++k)
      std::copy_n(std::as_const(p.value).row(p.grad.rows[k]), p.value.cols(), before.row(k));
  }
  optimizer_->step();  // lazy rows: moves exactly the rows listed in each gradient
  // Each parameter's gradient becomes the change the step made, and the weights go back: the
  // replicas apply the same averaged sum below, so they stay identical.
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i];
    const Tensor& before = before_update_[i];
    for (size_t k = 0; k < p.grad.rows.size(); ++k) {
      float* w = p.value.row(p.grad.rows[k]);
      float* d = p.grad.values.row(k);
      const float* b = before.row(k);
      for (size_t c = 0; c < p.value.cols(); ++c) {
        d[c] = w[c] - b[c];
        w[c] = b[c];
      }
    }
  }
  reducer_->reduce();
  const float mean = 1.0f / static_cast<float>(options_.parallel.data->size());
  for (Parameter* p : params)
    for (size_t k = 0; k < p->grad.rows.size(); ++k) {
      float* w = p->value.row(p->grad.rows[k]);
      const float* d = p->grad.values.row(k);
      for (size_t c = 0; c < p->value.cols(); ++c) w[c] += d[c] * mean;
    }
}

void Trainer::apply_deferred() {
  if (optimizer_->threshold_rows() == 0) return;  // nothing was ever listed for the rule
  optimizer_->apply_deferred();
  for (const auto& layer : model_.layers()) layer->after_update(step_);
}

void Trainer::catch_up() {
  if (options_.optimizer.updates != optim::SparseUpdates::catchup) return;
  optimizer_->catch_up();
  // The parameters' row lists now name the rows the catch-up moved (LSH tables rehash them).
  for (const auto& layer : model_.layers()) layer->after_update(step_);
}

bool Trainer::step_diverged(double loss) const {
  // The loss alone misses a NaN that a ReLU hides in the forward pass but the backward pass
  // carries into a weight's gradient (a NaN feature value of data built in memory): the gradients
  // are looked at too, which costs a pass over them (skip_batch only).
  bool bad = !std::isfinite(loss);
  Tensor scratch;
  for (const Parameter* p : model_.parameters()) {
    if (bad) break;
    if (p->grad.values.empty() || p->grad.values.dtype() != Dtype::f32) continue;
    const Tensor& g = host_view(p->grad.values, scratch);
    bad = !std::all_of(g.span().begin(), g.span().end(), [](float v) { return std::isfinite(v); });
  }
  // Every rank of the group decides alike (each holds its slice's gradients).
  if (is_active(options_.parallel.model)) {
    const std::vector<uint8_t> all =
        comm::all_gather_value(*options_.parallel.model, static_cast<uint8_t>(bad), "divergence flag");
    bad = std::any_of(all.begin(), all.end(), [](uint8_t b) { return b != 0; });
  }
  return bad;
}

void Trainer::drop_gradients() {
  for (Parameter* p : model_.parameters()) p->grad.clear();
}

DivergencePolicy Trainer::divergence_policy() const {
  return {.on = options_.on_divergence,
          .step_loss_is_global = !is_active(options_.parallel.data),
          .epoch = epoch_ + 1,
          .lr = optimizer_->lr(step_ + 1)};
}

double Trainer::loss(const SparseBatch& batch) {
  return model_.output().forward_backward(forward_hidden(batch), batch, step_, nullptr, 1.0f);
}

FitResult Trainer::fit_epoch(const data::Dataset& data, const FitOptions& options) {
  FRUGAL_CHECK(data.num_features <= model_.input().in_features(),
               fmt::format("{}: data has {} features, the model's input takes {}", data.source,
                           data.num_features, model_.input().in_features()));
  FRUGAL_CHECK(data.num_labels <= model_.output().out_features(),
               fmt::format("{}: data has {} labels, the model's output has {}", data.source, data.num_labels,
                           model_.output().out_features()));
  // The whole set's label counts (every replica has the same data), for sampled negatives.
  std::vector<uint32_t> label_counts(data.num_labels, 0);
  for (const uint32_t l : data.points.label_ids) ++label_counts[l];
  model_.output().set_label_counts(label_counts);
  data::BatchLoader loader = epoch::loader(data, options, options_.parallel.data);
  return fit_with(loader, loader.num_points(), options);
}

FitResult Trainer::fit_stream(data::PointStream& stream, std::span<const uint32_t> label_counts,
                              const FitOptions& options) {
  FRUGAL_CHECK(label_counts.size() <= model_.output().out_features(),
               fmt::format("a stream of {} labels, but the model's output has {}", label_counts.size(),
                           model_.output().out_features()));
  model_.output().set_label_counts(label_counts);
  return fit_with(stream, stream.samples(), options);
}

template <class Loader>
FitResult Trainer::fit_with(Loader& loader, size_t points, const FitOptions& options) {
  comm::Communicator* replicas = options_.parallel.data;
  Progress progress(fmt::format("{} epoch {}", options.label, epoch_ + 1), points, options.progress);
  FitResult result;
  const uint64_t scored_before = model_.output().labels_scored();
  const comm::ByteCount mp_before = traffic(options_.parallel.model), dp_before = traffic(options_.parallel.data);
  const uint64_t mp_payload_before = mp_payload(true), mp_uncompressed_before = mp_payload(false);
  const uint64_t dp_payload_before = dp_payload(true), dp_uncompressed_before = dp_payload(false);
  const uint64_t dp_touched_before = reducer_ ? reducer_->payload_touched() : 0;
  const std::vector<uint64_t> touched_before = touched_rows_;
  const profile::StepProfile profile_before = profile::thread_totals();
  const uint64_t crossed_before = host_device_bytes();
  const auto start = std::chrono::steady_clock::now();
  ClipTally clipping;
  const DivergencePolicy divergence = divergence_policy();
  const double loss_sum = epoch::run_steps(
      loader, options, result, divergence,
      [&](const SparseBatch& batch, size_t global) { return train_step(batch, global); },
      [&](double loss_so_far) {
        clipping.add(last_grad_norm_, options_.clip_norm > 0.0f ? last_clip_limit_ : 0.0);
        progress.update(result.samples, result.samples > 0 ? loss_so_far / result.samples : 0.0);
      });
  if (options.end_epoch) {
    apply_deferred();
    catch_up();
    epoch::require_finite_weights(model_.parameters(), {options_.parallel.model, replicas}, divergence);
  }
  result.profile = profile::thread_totals();
  result.profile -= profile_before;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.grad_norm = clipping.mean_norm();
  result.clipped_steps = clipping.clipped;
  result.host_device_bytes = host_device_bytes() - crossed_before;
  comm::ByteCount mp = traffic(options_.parallel.model), dp = traffic(options_.parallel.data);
  mp -= mp_before;
  dp -= dp_before;
  epoch::add_traffic(result, mp, dp);
  result.mp_payload_sent = mp_payload(true) - mp_payload_before;
  result.mp_payload_uncompressed = mp_payload(false) - mp_uncompressed_before;
  result.dp_payload_sent = dp_payload(true) - dp_payload_before;
  result.dp_payload_uncompressed = dp_payload(false) - dp_uncompressed_before;
  result.dp_payload_touched = (reducer_ ? reducer_->payload_touched() : 0) - dp_touched_before;
  result.touched_rows = touched_rows_;
  for (size_t i = 0; i < touched_before.size(); ++i) result.touched_rows[i] -= touched_before[i];
  epoch::finish(result, loss_sum, replicas, divergence);
  result.labels_scored_per_sample = result.group_samples > 0
      ? static_cast<double>(model_.output().labels_scored() - scored_before) / result.group_samples : 0.0;
  if (options.end_epoch) ++epoch_;
  progress.finish(fmt::format("done: {} samples in {:.2f} s ({:.0f} samples/s), loss {:.4f}", result.samples,
                              result.seconds, result.samples_per_s, result.loss));
  return result;
}

uint64_t Trainer::host_device_bytes() const {
  // Each backend the step computes on, once (the layers' and the optimizer's are one, unless a
  // caller gave them different ones).
  std::vector<const Backend*> seen;
  uint64_t bytes = 0;
  const auto add = [&](const Backend& b) {
    if (std::find(seen.begin(), seen.end(), &b) != seen.end()) return;
    seen.push_back(&b);
    bytes += b.transfers().crossed_bytes();
  };
  for (const auto& layer : model_.layers()) add(layer->backend());
  add(optimizer_->backend());
  return bytes;
}

void Trainer::init_output_from_centroids(const data::Dataset& data, float scale, size_t batch_size) {
  data::BatchLoader loader(data, {.batch = batch_size, .shuffle = false});
  init_output_from_centroids([&loader](SparseBatch& batch) { return loader.next(batch); }, scale);
}

void Trainer::init_output_from_centroids(const std::function<bool(SparseBatch&)>& next, float scale) {
  SparseBatch batch;
  double squares = 0.0;
  std::vector<double> sum;
  size_t points = 0;
  Tensor copy;
  while (next(batch)) {
    const Tensor& hidden = forward_hidden(batch);
    const Tensor& h = host_view(hidden, copy);  // the statistics are the host's
    sum.resize(h.cols(), 0.0);
    for (size_t i = 0; i < h.rows(); ++i)
      for (size_t c = 0; c < h.cols(); ++c) {
        const double v = h.at(i, c);
        squares += v * v;
        sum[c] += v;
      }
    points += batch.size();
    model_.output().accumulate_centroids(hidden, batch);
  }
  if (points == 0) return;
  std::vector<float> mean(sum.size());
  for (size_t c = 0; c < sum.size(); ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(points));
  const double rms = std::sqrt(squares / static_cast<double>(points));
  // All-zero hidden vectors (dead ReLUs) give no direction: keep the random rows then.
  if (rms > 0.0) model_.output().finish_centroids(static_cast<float>(scale / rms), mean);
}

void Trainer::predict(const SparseBatch& batch, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  model_.output().top_k(forward_hidden(batch), k, labels, scores);
}

EvalResult Trainer::evaluate(const data::Dataset& data, const EvalOptions& options) {
  OutputLayer& output = model_.output();
  // The metrics are counted where the output layer ranks (on a device only the sums come down); the
  // flags cover every label the model predicts and the data holds.
  RankingCounter metric(output.backend(), options.k,
                        RankingCounter::label_width(output.out_features(), data.points.label_ids), options.propensities);
  data::BatchLoader loader(data, {.batch = options.batch, .shuffle = false});
  Progress progress("evaluate", loader.num_points(), options.progress);
  SparseBatch batch;
  const InferenceOptions before = output.inference();
  output.set_inference({.mode = options.inference, .candidates = options.inference_candidates});
  const uint64_t scored_before = output.labels_scored();
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint32_t> net_labels, top_labels;
  std::vector<float> net_scores, top_scores;
  Tensor top_tensor;
  while (loader.next(batch)) {
    metric.set_batch(batch);
    if (options.ensemble != nullptr) {
      // The network's candidates come to the host (the centroids live there), blended, and the
      // k best go back where the metrics are counted.
      const size_t want = std::max(metric.max_k(), options.ensemble->options().candidates);
      output.top_k(forward_hidden(batch), want, net_labels, net_scores);
      const size_t net_k = batch.size() == 0 ? 0 : net_labels.size() / batch.size();
      const size_t width = options.ensemble->blend(batch, net_labels, net_scores, net_k, metric.max_k(), top_labels,
                                                   top_scores);
      const Tensor host = Tensor::wrap(top_labels.data(), batch.size(), width, Dtype::u32);
      if (output.backend().device().is_host()) {
        metric.add(0, host);
      } else {
        top_tensor = Tensor(batch.size(), width, Dtype::u32, output.backend());
        top_tensor.assign(host);
        metric.add(0, top_tensor);
      }
    } else {
      output.visit_top_k(forward_hidden(batch), metric.max_k(),
                         [&](size_t first_row, const Tensor& top) { metric.add(first_row, top); });
    }
    progress.update(metric.points(), 0.0);
  }
  EvalResult result;
  static_cast<RankingScores&>(result) = metric.values();
  result.samples = metric.points();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.labels_scored_per_sample =
      result.samples > 0 ? static_cast<double>(output.labels_scored() - scored_before) / result.samples : 0.0;
  output.set_inference(before);
  return result;
}

}  // namespace frugal::train
