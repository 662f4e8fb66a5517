#include "train/pipeline_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <span>

#include <fmt/format.h>

#include "comm/exchange_factory.h"
#include "core/check.h"
#include "core/communicator.h"
#include "core/data/batch_loader.h"
#include "core/progress.h"
#include "core/step_profile.h"
#include "train/ensemble_ranker.h"
#include "train/epoch_run.h"
#include "train/gradient_clipping.h"
#include "train/ranking_counter.h"

namespace frugal::train {
namespace {
using comm::is_active;
using comm::StageLink;

// Point-to-point tag of the boundary after stage b (tags are per source rank).
constexpr int kStageTag = 0x5050;
// Point-to-point tag of the boundary after the network's layer i inside a sliced stage.
constexpr int kSliceTag = 0x4d50;
// The micro-batch number of an evaluation pass (no backward follows).
constexpr size_t kEvalMicro = SIZE_MAX - 1;

comm::ByteCount traffic(const comm::Communicator* c) { return c != nullptr ? c->stats().total() : comm::ByteCount{}; }

// The sum of row-sparse gradients with sorted rows (host memory), in their order, into `sum`
// (whose memory is reused: an output layer's rows are hundreds of MB, and fresh memory costs its
// page faults each time): one pass over each part's values into the union of their rows (a merge
// after every micro-batch would copy the growing sum again each time).
void sum_parts(const std::vector<RowGrad>& parts, RowGrad& sum) {
  std::vector<uint32_t> rows, merged;
  for (const RowGrad& p : parts) {
    merged.clear();
    std::set_union(rows.begin(), rows.end(), p.rows.begin(), p.rows.end(), std::back_inserter(merged));
    rows.swap(merged);
  }
  const size_t cols = parts.front().values.cols();
  sum.values.resize(rows.size(), cols);
  sum.values.zero();  // 0 + g is g: the order of the sums is the parts'
  for (const RowGrad& p : parts) {
    size_t k = 0;
    for (size_t j = 0; j < p.rows.size(); ++j) {
      while (rows[k] != p.rows[j]) ++k;
      float* out = sum.values.row(k);
      const float* in = p.values.row(j);
      for (size_t c = 0; c < cols; ++c) out[c] += in[c];
    }
  }
  sum.rows = std::move(rows);
}

// A double from the root of `group` on every rank.
double broadcast_double(comm::Communicator& group, double value, int root) {
  std::vector<std::byte> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  group.broadcast_bytes(bytes, root).wait();
  FRUGAL_CHECK(bytes.size() == sizeof value, "pipeline: a bad broadcast of a scalar");
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}
}  // namespace

void PipelineOptions::validate() const {
  FRUGAL_CHECK(pipeline != nullptr, "PipelineOptions::pipeline: no pipeline group");
  FRUGAL_CHECK(micro_batches >= 1, "PipelineOptions::micro_batches must be at least 1");
  FRUGAL_CHECK(total_layers >= static_cast<size_t>(pipeline->size()),
               fmt::format("a pipeline of {} stages needs at least as many layers; the network has {}", pipeline->size(),
                           total_layers));
  boundary.validate();
  FRUGAL_CHECK(optimizer.updates != optim::SparseUpdates::catchup,
               "--pipeline: --sparse-updates catchup is not implemented for pipeline stages (use lazy)");
  FRUGAL_CHECK(on_divergence == OnDivergence::stop,
               "--pipeline: --on-divergence skip-batch is not implemented for pipeline stages (only the last stage "
               "sees the loss, after the earlier stages have stepped; use --on-divergence stop)");
}

PipelineTrainer::PipelineTrainer(Model& stage_model, const PipelineOptions& options)
    : model_(stage_model), options_(options) {
  options_.validate();
  const auto& layers = model_.layers();
  FRUGAL_CHECK(!layers.empty(), "a pipeline stage needs at least one layer");
  const size_t end = options_.first_layer + layers.size();
  FRUGAL_CHECK(end <= options_.total_layers, "a pipeline stage's layers run past the network's");
  FRUGAL_CHECK((options_.first_layer == 0) == first_stage() && (end == options_.total_layers) == last_stage(),
               fmt::format("pipeline stage {} of {} holds layers {}..{} of {}: the first stage must hold the input "
                           "layer and the last the output layer", stage(), stages(), options_.first_layer, end - 1,
                           options_.total_layers));
  input();
  output();
  hidden_ = find_hidden();  // the layer kinds check themselves
  params_ = model_.parameters();
  for (size_t i = 1; i < layers.size(); ++i)
    FRUGAL_CHECK(layers[i - 1]->out_features() == layers[i]->in_features(),
                 fmt::format("pipeline stage {}: layer {} gives {} outputs, layer {} takes {}", stage(), i - 1,
                             layers[i - 1]->out_features(), i, layers[i]->in_features()));
  if (options_.optimizer.method == optim::Method::automatic) {
    // The choice depends on the output layer, which only the last stage holds: it tells the others
    // (every stage constructs its trainer at the same point of the run).
    float sampled = last_stage() && output()->sampled() ? 1.0f : 0.0f;
    if (stages() > 1) options_.pipeline->broadcast(std::span<float>(&sampled, 1), stages() - 1).wait();
    options_.optimizer = resolve_automatic(options_.optimizer, sampled != 0.0f);
  }
  optimizer_ = optim::Optimizer::create(options_.optimizer, params_, options_.lr_schedule);
  optimizer_->set_backend(&layers.back()->backend());
  run_id_ = fmt::format("{:016x}", (uint64_t{std::random_device{}()} << 32) | std::random_device{}());
  comm::Communicator& group = *options_.pipeline;
  if (!first_stage())
    prev_ = exchanges().stage_link(group, stage() - 1, layers.front()->in_features(), options_.boundary,
                                   kStageTag + stage() - 1);
  if (!last_stage())
    next_ = exchanges().stage_link(group, stage() + 1, layers.back()->out_features(), options_.boundary,
                                   kStageTag + stage());
  comm::Communicator* slices = options_.model;
  if (is_active(slices) && last_stage())
    FRUGAL_CHECK(output()->placement().group == slices && output()->placement().is_sliced(),
                 "a sliced pipeline stage needs its output layer sliced over the stage group (Placement::sliced)");
  for (size_t k = 0; k < layers.size(); ++k) {
    const Layer& layer = *layers[k];
    if (dynamic_cast<const OutputLayer*>(&layer) != nullptr || !layer.placement().is_sliced()) {
      boundaries_.push_back(nullptr);
      continue;
    }
    FRUGAL_CHECK(layer.placement().group == slices,
                 fmt::format("pipeline stage {}: layer {} ({}) is sliced over a group other than the stage's", stage(),
                             options_.first_layer + k, layer.kind()));
    comm::MpCompression mp = options_.boundary;
    if (options_.first_layer + k > 0 && mp.straight_through == comm::StraightThrough::input)
      mp.straight_through = comm::StraightThrough::off;
    boundaries_.push_back(exchanges().activation_exchange(layer.placement(), layer.out_features(), mp,
                                                          kSliceTag + static_cast<int>(options_.first_layer + k)));
  }
  if (is_active(options_.data)) {
    comm::ReducerOptions o;
    o.mode = options_.dp ? comm::ReduceMode::thresholded : comm::ReduceMode::touched_rows;
    if (options_.dp) o.dp = *options_.dp;
    reducer_ = exchanges().replica_reducer(*options_.data, params_, o);
  }
}

PipelineTrainer::~PipelineTrainer() = default;

int PipelineTrainer::stage() const { return options_.pipeline->rank(); }
int PipelineTrainer::stages() const { return options_.pipeline->size(); }

const comm::ExchangeFactory& PipelineTrainer::exchanges() const {
  return options_.exchanges != nullptr ? *options_.exchanges : comm::comm_exchanges();
}

InputLayer* PipelineTrainer::input() const {
  if (!first_stage()) return nullptr;
  auto* in = dynamic_cast<InputLayer*>(model_.layers().front().get());
  FRUGAL_CHECK(in != nullptr, "the first pipeline stage must start with the input layer");
  return in;
}

OutputLayer* PipelineTrainer::output() const {
  if (!last_stage()) return nullptr;
  auto* out = dynamic_cast<OutputLayer*>(model_.layers().back().get());
  FRUGAL_CHECK(out != nullptr, "the last pipeline stage must end with the output layer");
  return out;
}

std::vector<HiddenLayer*> PipelineTrainer::find_hidden() const {
  std::vector<HiddenLayer*> out;
  const auto& layers = model_.layers();
  const size_t first = first_stage() ? 1 : 0, end = layers.size() - (last_stage() ? 1 : 0);
  for (size_t i = first; i < end; ++i) {
    auto* h = dynamic_cast<HiddenLayer*>(layers[i].get());
    FRUGAL_CHECK(h != nullptr, fmt::format("pipeline stage {}: layer {} ({}) must be a dense-to-dense layer", stage(),
                                           options_.first_layer + i, layers[i]->describe()));
    out.push_back(h);
  }
  return out;
}

uint64_t PipelineTrainer::boundary_payload(bool sent) const {
  uint64_t total = 0;
  for (const StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) total += sent ? l->payload_sent() : l->payload_uncompressed();
  for (const auto& b : boundaries_)
    if (b) total += sent ? b->payload_sent() : b->payload_uncompressed();
  return total;
}

const Tensor& PipelineTrainer::stage_input(size_t m) {
  if (m == kEvalMicro) return prev_->recv_forward(m);
  if (!received_[m]) {
    inputs_[m] = prev_->recv_forward(m);
    received_[m] = true;
  }
  return inputs_[m];
}

void PipelineTrainer::forward(size_t m, bool send) {
  const SparseBatch& mb = m == kEvalMicro ? micro_.back() : micro_[m];
  activations_.clear();
  for (const auto& b : boundaries_)
    if (b) b->set_step(step_);
  const Tensor* h = first_stage() ? &exchange_forward(0, input()->forward(mb)) : &stage_input(m);
  const size_t first = first_stage() ? 1 : 0;
  const std::vector<HiddenLayer*>& layers = hidden_;
  for (size_t j = 0; j < layers.size(); ++j) {
    activations_.push_back(h);
    h = &exchange_forward(first + j, layers[j]->forward(*h));
  }
  activations_.push_back(h);
  forwarded_ = m;
  if (send && next_) next_->send_forward(*h, m);
}

Tensor PipelineTrainer::spare_buffer(size_t param) {
  std::vector<Tensor>& pool = spare_[param];
  if (pool.empty()) return Tensor();
  Tensor t = std::move(pool.back());
  pool.pop_back();
  return t;
}

void PipelineTrainer::accumulate_gradients() {
  const std::vector<Parameter*>& params = params_;
  parts_.resize(params.size());
  spare_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    RowGrad& g = params[i]->grad;
    g.fetch_rows();
    if (g.rows.empty()) continue;
    std::vector<RowGrad>& parts = parts_[i];
    if (!parts.empty() && parts.front().rows == g.rows) {  // a dense layer: every row every time, summed in place
      float* a = parts.front().values.data();
      const float* b = g.values.data();
      for (size_t k = 0, n = g.values.size(); k < n; ++k) a[k] += b[k];
      continue;
    }
    // Taken over, not copied; the layer writes its next micro-batch's gradient into a spare buffer.
    RowGrad& part = parts.emplace_back();
    part.rows.swap(g.rows);
    std::swap(part.values, g.values);
    if (!part.values.is_host()) part.values = to_host(part.values);
    g.clear();
    g.values = spare_buffer(i);
  }
}

const Tensor& PipelineTrainer::exchange_forward(size_t k, const Tensor& local) {
  return boundaries_[k] ? boundaries_[k]->gather(local) : local;
}

const Tensor& PipelineTrainer::exchange_backward(size_t k, const Tensor& grad, bool partial) {
  if (boundaries_[k]) return partial ? boundaries_[k]->reduce_scatter(grad) : boundaries_[k]->own_slice(grad);
  if (!partial) return grad;
  // A replicated layer feeding a sliced one: every rank needs the whole sum.
  grad_full_ = to_host(grad);
  options_.model->all_reduce(grad_full_.span()).wait();
  return grad_full_;
}

void PipelineTrainer::backward_from(size_t m, const Tensor& g_out, bool partial) {
  const std::vector<HiddenLayer*>& layers = hidden_;
  const size_t first = first_stage() ? 1 : 0;
  const Tensor* g = &g_out;
  for (size_t j = layers.size(); j-- > 0;) {
    const Tensor& local = exchange_backward(first + j, *g, partial);
    g = &layers[j]->backward(*activations_[j], local);
    partial = boundaries_[first + j] != nullptr;  // a sliced layer's input gradient is its share
  }
  if (first_stage()) {
    input()->backward(micro_[m], exchange_backward(0, *g, partial));
  } else if (partial) {  // the previous stage needs the whole gradient of its output: summed over the group
    grad_full_ = to_host(*g);
    options_.model->all_reduce(grad_full_.span()).wait();
    prev_->send_backward(grad_full_, m);
  } else {
    prev_->send_backward(to_host(*g), m);
  }
  accumulate_gradients();
}

void PipelineTrainer::last_stage_step(size_t m) {
  forward(m, false);
  keep_on(grad_, output()->backend());
  step_loss_ += output()->forward_backward(*activations_.back(), micro_[m], step_, &grad_, scale_);
  backward_from(m, grad_, is_active(options_.model));  // a sliced output layer gives each rank its share
  if (!first_stage()) inputs_[m] = Tensor();  // its backward is done
}

void PipelineTrainer::backward(size_t m) {
  const Tensor g = next_->recv_backward(m);  // a copy: a recomputation's exchange may not touch it, but be safe
  if (forwarded_ != m) forward(m, false);    // the layers hold a later micro-batch: recompute this one's
  backward_from(m, g, false);                 // the next stage sent the whole gradient
  if (!first_stage()) inputs_[m] = Tensor();
}

double PipelineTrainer::train_step(const SparseBatch& full_batch, size_t global_batch) {
  const profile::Scope phase(profile::Phase::other);
  const SparseBatch* batch = &full_batch;
  if (options_.dropout.p > 0.0f && first_stage()) {
    const bool sharded = is_active(options_.data);
    drop_input_features(full_batch, options_.dropout, step_, sharded ? options_.data->rank() : 0,
                        sharded ? options_.data->size() : 1, dropped_);
    batch = &dropped_;
  }
  if (global_batch == 0) global_batch = batch->size();
  scale_ = global_batch > 0 ? 1.0f / static_cast<float>(global_batch) : 0.0f;
  const size_t rows = batch->size();
  const size_t n = std::max<size_t>(1, std::min(options_.micro_batches, rows));
  micro_.resize(n);
  for (size_t m = 0; m < n; ++m) micro_[m].assign_points(*batch, rows * m / n, rows * (m + 1) / n - rows * m / n);
  inputs_.assign(n, Tensor());
  received_.assign(n, false);
  for (StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) l->set_step(step_);
  for (std::vector<RowGrad>& parts : parts_) parts.clear();
  step_loss_ = 0.0;
  forwarded_ = SIZE_MAX;
  // 1F1B: S - 1 - s forward passes ahead, then one forward and one backward each, then the rest.
  const size_t ahead = last_stage() ? 0 : std::min<size_t>(static_cast<size_t>(stages() - stage() - 1), n);
  try {
    for (size_t m = 0; m < ahead; ++m) forward(m, true);
    for (size_t i = 0; i + ahead < n; ++i) {
      if (last_stage()) {
        last_stage_step(i);
      } else {
        forward(i + ahead, true);
        backward(i);
      }
    }
    for (size_t i = n - ahead; i < n; ++i) backward(i);
    for (StageLink* l : {prev_.get(), next_.get()})
      if (l != nullptr) l->wait_sends();
  } catch (...) {
    for (StageLink* l : {prev_.get(), next_.get()})
      if (l != nullptr) {
        try {
          l->wait_sends();
        } catch (...) {  // the step is failing already: its own error is the one to report
        }
      }
    throw;
  }
  const std::vector<Parameter*>& params = params_;
  for (size_t i = 0; i < params.size(); ++i) {
    RowGrad& g = params[i]->grad;
    g.clear();
    if (i >= parts_.size() || parts_[i].empty()) continue;
    std::vector<RowGrad>& parts = parts_[i];
    if (parts.size() > 1) {
      RowGrad sum;
      sum.values = std::move(g.values);  // the spare buffer the layer did not use
      sum_parts(parts, sum);
      g.rows = std::move(sum.rows);
      g.values = std::move(sum.values);
    } else {
      spare_[i].push_back(std::move(g.values));
      g.rows = std::move(parts.front().rows);
      g.values = std::move(parts.front().values);
      parts.clear();
    }
    for (RowGrad& part : parts) spare_[i].push_back(std::move(part.values));  // for the next step's micro-batches
    parts.clear();
  }
  if (reducer_) reducer_->reduce();
  if (options_.clip_norm > 0.0f) {
    // The stages hold disjoint parameters: the whole model's squared norm is the sum of theirs.
    last_grad_norm_ = clip_gradient_norm(params, options_.clip_norm, options_.model, options_.pipeline);
    // Every stage and replica holds the same norm here: they stop together.
    if (!std::isfinite(last_grad_norm_))
      throw_divergence(divergence_where(epoch_ + 1, 0) + fmt::format(" (optimizer step {})", step_ + 1),
                       "gradient norm", last_grad_norm_, optimizer_->lr(step_ + 1));
  }
  optimizer_->step();
  ++step_;
  for (const auto& layer : model_.layers()) layer->after_update(step_);
  return step_loss_;
}

void PipelineTrainer::apply_deferred() {
  if (optimizer_->threshold_rows() == 0) return;
  optimizer_->apply_deferred();
  for (const auto& layer : model_.layers()) layer->after_update(step_);
}

FitResult PipelineTrainer::fit_epoch(const data::Dataset& data, const FitOptions& options) {
  if (last_stage()) {
    FRUGAL_CHECK(data.num_labels <= output()->out_features(),
                 fmt::format("{}: data has {} labels, the model's output has {}", data.source, data.num_labels,
                             output()->out_features()));
    std::vector<uint32_t> label_counts(data.num_labels, 0);
    for (const uint32_t l : data.points.label_ids) ++label_counts[l];
    output()->set_label_counts(label_counts);
  }
  if (first_stage())
    FRUGAL_CHECK(data.num_features <= input()->in_features(),
                 fmt::format("{}: data has {} features, the model's input takes {}", data.source, data.num_features,
                             input()->in_features()));
  comm::Communicator* replicas = options_.data;
  data::BatchLoader loader = epoch::loader(data, options, replicas);
  Progress progress(fmt::format("{} epoch {}", options.label, epoch_ + 1), loader.num_points(), options.progress);
  FitResult result;
  const uint64_t scored_before = last_stage() ? output()->labels_scored() : 0;
  // Model-parallel bytes: the stage boundaries and, in a sliced stage, its group's exchanges.
  const auto model_traffic = [&] {
    comm::ByteCount c = traffic(options_.pipeline);
    c += traffic(options_.model);
    return c;
  };
  const comm::ByteCount mp_before = model_traffic(), dp_before = traffic(options_.data);
  const uint64_t payload_before = boundary_payload(true), uncompressed_before = boundary_payload(false);
  const uint64_t dp_payload_before = reducer_ ? reducer_->payload_sent() : 0;
  const uint64_t dp_uncompressed_before = reducer_ ? reducer_->payload_uncompressed() : 0;
  const profile::StepProfile profile_before = profile::thread_totals();
  const auto start = std::chrono::steady_clock::now();
  // Only the last stage knows a step's loss: the stages stop together at the epoch's end.
  const DivergencePolicy divergence{.on = OnDivergence::stop, .step_loss_is_global = false, .epoch = epoch_ + 1,
                                    .lr = optimizer_->lr(step_ + 1)};
  ClipTally clipping;
  double loss_sum = epoch::run_steps(
      loader, options, result, divergence,
      [&](const SparseBatch& batch, size_t global) { return train_step(batch, global); },
      [&](double loss_so_far) {
        clipping.add(last_grad_norm_, options_.clip_norm);
        // Only the last stage knows the loss: the bar shows it there (other stages show 0).
        progress.update(result.samples, result.samples > 0 ? loss_so_far / static_cast<double>(result.samples) : 0.0);
      });
  if (options.end_epoch) {
    apply_deferred();
    epoch::require_finite_weights(model_.parameters(), {options_.model, options_.pipeline, replicas}, divergence);
  }
  result.profile = profile::thread_totals();
  result.profile -= profile_before;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.grad_norm = clipping.mean_norm();
  result.clipped_steps = clipping.clipped;
  comm::ByteCount mp = model_traffic(), dp = traffic(options_.data);
  mp -= mp_before;
  dp -= dp_before;
  epoch::add_traffic(result, mp, dp);
  result.mp_payload_sent = boundary_payload(true) - payload_before;
  result.mp_payload_uncompressed = boundary_payload(false) - uncompressed_before;
  result.dp_payload_sent = (reducer_ ? reducer_->payload_sent() : 0) - dp_payload_before;
  result.dp_payload_uncompressed = (reducer_ ? reducer_->payload_uncompressed() : 0) - dp_uncompressed_before;
  // The loss and the active labels are the last stage's; every stage reports them.
  double scored = last_stage() ? static_cast<double>(output()->labels_scored() - scored_before) : 0.0;
  if (is_active(options_.pipeline)) {
    loss_sum = broadcast_double(*options_.pipeline, loss_sum, stages() - 1);
    scored = broadcast_double(*options_.pipeline, scored, stages() - 1);
  }
  epoch::finish(result, loss_sum, replicas, divergence);
  result.labels_scored_per_sample =
      result.group_samples > 0 ? scored / static_cast<double>(result.group_samples) : 0.0;
  if (options.end_epoch) ++epoch_;
  progress.finish(fmt::format("done: {} samples in {:.2f} s ({:.0f} samples/s), loss {:.4f}", result.samples,
                              result.seconds, result.samples_per_s, result.loss));
  return result;
}

EvalResult PipelineTrainer::evaluate(const data::Dataset& data, const EvalOptions& options) {
  std::optional<RankingCounter> metric;
  InferenceOptions before;
  uint64_t scored_before = 0;
  if (last_stage()) {
    OutputLayer& out = *output();
    metric.emplace(out.backend(), options.k, RankingCounter::label_width(out.out_features(), data.points.label_ids),
                   options.propensities);
    before = out.inference();
    out.set_inference({.mode = options.inference, .candidates = options.inference_candidates});
    scored_before = out.labels_scored();
  }
  data::BatchLoader loader(data, {.batch = options.batch, .shuffle = false});
  Progress progress("evaluate", loader.num_points(), options.progress && last_stage());
  for (StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) l->set_step(step_);
  const auto start = std::chrono::steady_clock::now();
  micro_.resize(1);
  std::vector<uint32_t> net_labels, top_labels;
  std::vector<float> net_scores, top_scores;
  while (loader.next(micro_.back())) {
    const SparseBatch& batch = micro_.back();
    forward(kEvalMicro, true);
    if (prev_) prev_->forget(kEvalMicro);
    if (next_) next_->forget(kEvalMicro);
    if (!last_stage()) continue;
    metric->set_batch(batch);
    const Tensor& h = *activations_.back();
    if (options.ensemble != nullptr) {
      const size_t want = std::max(metric->max_k(), options.ensemble->options().candidates);
      output()->top_k(h, want, net_labels, net_scores);
      const size_t net_k = batch.size() == 0 ? 0 : net_labels.size() / batch.size();
      const size_t width = options.ensemble->blend(batch, net_labels, net_scores, net_k, metric->max_k(), top_labels,
                                                   top_scores);
      metric->add(0, Tensor::wrap(top_labels.data(), batch.size(), width, Dtype::u32));
    } else {
      output()->visit_top_k(h, metric->max_k(), [&](size_t first_row, const Tensor& top) { metric->add(first_row, top); });
    }
    progress.update(metric->points(), 0.0);
  }
  for (StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) l->wait_sends();
  EvalResult result;
  if (last_stage()) {
    static_cast<RankingScores&>(result) = metric->values();
    result.samples = metric->points();
    result.labels_scored_per_sample =
        result.samples > 0 ? static_cast<double>(output()->labels_scored() - scored_before) / result.samples : 0.0;
    output()->set_inference(before);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (is_active(options_.pipeline)) {  // the last stage's scores to every stage
    std::vector<double> flat;
    for (auto* m : {&result.precision, &result.ndcg, &result.psp, &result.psndcg, &result.recall, &result.coverage}) {
      flat.push_back(static_cast<double>(m->size()));
      for (const auto& [k, v] : *m) flat.push_back(static_cast<double>(k)), flat.push_back(v);
    }
    flat.push_back(static_cast<double>(result.samples));
    flat.push_back(result.labels_scored_per_sample);
    std::vector<std::byte> bytes(flat.size() * sizeof(double));
    std::memcpy(bytes.data(), flat.data(), bytes.size());
    options_.pipeline->broadcast_bytes(bytes, stages() - 1).wait();
    FRUGAL_CHECK(bytes.size() % sizeof(double) == 0, "pipeline: bad evaluation scores from the last stage");
    flat.resize(bytes.size() / sizeof(double));
    std::memcpy(flat.data(), bytes.data(), bytes.size());
    size_t at = 0;
    const auto next = [&]() {
      FRUGAL_CHECK(at < flat.size(), "pipeline: truncated evaluation scores from the last stage");
      return flat[at++];
    };
    for (auto* m : {&result.precision, &result.ndcg, &result.psp, &result.psndcg, &result.recall, &result.coverage}) {
      m->clear();
      const auto count = static_cast<size_t>(next());
      for (size_t i = 0; i < count; ++i) {
        const auto k = static_cast<size_t>(next());
        (*m)[k] = next();
      }
    }
    result.samples = static_cast<size_t>(next());
    result.labels_scored_per_sample = next();
  }
  return result;
}

void PipelineTrainer::init_output_from_centroids(const data::Dataset& data, float scale, size_t batch_size) {
  data::BatchLoader loader(data, {.batch = batch_size, .shuffle = false});
  for (StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) l->set_step(step_);
  micro_.resize(1);
  double squares = 0.0;
  std::vector<double> sum;
  size_t points = 0;
  while (loader.next(micro_.back())) {
    forward(kEvalMicro, true);
    if (prev_) prev_->forget(kEvalMicro);
    if (next_) next_->forget(kEvalMicro);
    if (!last_stage()) continue;
    const Tensor& h = *activations_.back();
    sum.resize(h.cols(), 0.0);
    for (size_t i = 0; i < h.rows(); ++i)
      for (size_t c = 0; c < h.cols(); ++c) {
        const double v = h.at(i, c);
        squares += v * v;
        sum[c] += v;
      }
    points += micro_.back().size();
    output()->accumulate_centroids(h, micro_.back());
  }
  for (StageLink* l : {prev_.get(), next_.get()})
    if (l != nullptr) l->wait_sends();
  if (!last_stage() || points == 0) return;
  std::vector<float> mean(sum.size());
  for (size_t c = 0; c < sum.size(); ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(points));
  const double rms = std::sqrt(squares / static_cast<double>(points));
  if (rms > 0.0) output()->finish_centroids(static_cast<float>(scale / rms), mean);
}

}  // namespace frugal::train
