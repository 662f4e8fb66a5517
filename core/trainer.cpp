#include "core/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "comm/communicator.h"
#include "core/batch_loader.h"
#include "core/check.h"
#include "core/metrics.h"
#include "core/progress.h"

namespace frugal {

double EvalResult::p(size_t k) const {
  const auto it = precision.find(k);
  FRUGAL_CHECK(it != precision.end(), fmt::format("P@{} was not evaluated", k));
  return it->second;
}

Trainer::Trainer(Model& model, const TrainerOptions& options)
    : model_(model), options_(options), optimizer_(options.optimizer, (model.validate(), model.parameters())) {
  options_.validate();
  if (options_.parallel.model != nullptr && options_.parallel.model->size() > 1)
    // The gradient sums over the group assume each rank holds a different block of the labels.
    FRUGAL_CHECK(model_.output().placement().group == options_.parallel.model && model_.output().placement().is_sliced(),
                 "a model-parallel trainer needs the output layer sliced over the same group (Placement::sliced)");
}

namespace {
bool active_group(const comm::Communicator* c) { return c != nullptr && c->size() > 1; }
}  // namespace

const Tensor& Trainer::gather_input(const Tensor& local) {
  const Placement& pl = model_.input().placement();
  if (!pl.is_sliced()) return local;
  FRUGAL_CHECK(pl.group == options_.parallel.model,
               "the input layer is sliced over a group other than the trainer's model-parallel group");
  const size_t b = local.rows(), width = model_.input().out_features();
  const auto bounds = pl.bounds(width);
  std::vector<size_t> counts(pl.parts());
  for (int r = 0; r < pl.parts(); ++r) counts[r] = b * (bounds[r + 1] - bounds[r]);
  exchange_.resize(1, std::accumulate(counts.begin(), counts.end(), size_t{0}));
  pl.group->all_gatherv(local.span(), exchange_.span(), counts).wait();
  // The gathered buffer holds each rank's B x w_r block in turn; interleave them into B x H.
  gathered_.resize(b, width);
  const auto offsets = comm::displacements(counts);
  for (int r = 0; r < pl.parts(); ++r) {
    const size_t w = bounds[r + 1] - bounds[r];
    for (size_t i = 0; i < b; ++i)
      std::copy_n(exchange_.data() + offsets[r] + i * w, w, gathered_.row(i) + bounds[r]);
  }
  return gathered_;
}

const Tensor& Trainer::input_gradient(const Tensor& partial) {
  const Placement& pl = model_.input().placement();
  comm::Communicator* group = options_.parallel.model;
  if (!active_group(group)) return partial;
  const size_t b = partial.rows(), width = partial.cols();
  if (!pl.is_sliced()) {  // replicated input layer: every rank needs the full sum
    grad_slice_ = partial;
    group->all_reduce(grad_slice_.span()).wait();
    return grad_slice_;
  }
  const auto bounds = pl.bounds(width);
  std::vector<size_t> counts(pl.parts());
  for (int r = 0; r < pl.parts(); ++r) counts[r] = b * (bounds[r + 1] - bounds[r]);
  const auto offsets = comm::displacements(counts);
  exchange_.resize(1, std::accumulate(counts.begin(), counts.end(), size_t{0}));
  for (int r = 0; r < pl.parts(); ++r) {
    const size_t w = bounds[r + 1] - bounds[r];
    for (size_t i = 0; i < b; ++i) std::copy_n(partial.row(i) + bounds[r], w, exchange_.data() + offsets[r] + i * w);
  }
  const int me = pl.rank();
  grad_slice_.resize(b, bounds[me + 1] - bounds[me]);
  group->reduce_scatterv(exchange_.span(), grad_slice_.span(), counts).wait();
  return grad_slice_;
}

void Trainer::sum_gradients_over_replicas() {
  comm::Communicator* group = options_.parallel.data;
  if (!active_group(group)) return;
  for (Parameter* p : model_.parameters()) {
    const size_t cols = p->value.cols(), rows = p->value.rows();
    RowGrad& g = p->grad;
    if (options_.parallel.dense_gradients) {
      // The Horovod scheme: the whole gradient, every row, every step.
      exchange_.resize(rows, cols);
      exchange_.zero();
      for (size_t j = 0; j < g.rows.size(); ++j) std::copy_n(g.values.row(j), cols, exchange_.row(g.rows[j]));
      group->all_reduce(exchange_.span()).wait();
      g.rows.resize(rows);
      std::iota(g.rows.begin(), g.rows.end(), 0u);
      g.values = exchange_;
      continue;
    }
    // Only rows some replica touched: agree on their union, then sum over it.
    std::vector<std::vector<std::byte>> all;
    group->all_gather_bytes(std::as_bytes(std::span<const uint32_t>(g.rows)), all).wait();
    std::vector<uint32_t> rows_union;
    for (const auto& bytes : all) {
      const size_t n = bytes.size() / sizeof(uint32_t);
      const size_t before = rows_union.size();
      rows_union.resize(before + n);
      std::memcpy(rows_union.data() + before, bytes.data(), n * sizeof(uint32_t));
    }
    std::sort(rows_union.begin(), rows_union.end());
    rows_union.erase(std::unique(rows_union.begin(), rows_union.end()), rows_union.end());
    exchange_.resize(rows_union.size(), cols);
    exchange_.zero();
    for (size_t j = 0, u = 0; j < g.rows.size(); ++j) {
      while (rows_union[u] != g.rows[j]) ++u;
      std::copy_n(g.values.row(j), cols, exchange_.row(u));
    }
    group->all_reduce(exchange_.span()).wait();
    g.rows = std::move(rows_union);
    g.values = exchange_;
  }
}

uint64_t Trainer::wire_bytes(bool sent) const {
  uint64_t total = 0;
  for (const comm::Communicator* c : {options_.parallel.model, options_.parallel.data})
    if (c != nullptr) total += sent ? c->stats().total().sent : c->stats().total().received;
  return total;
}

const Tensor& Trainer::forward_hidden(const SparseBatch& batch) {
  activations_.clear();
  const Tensor* h = &gather_input(model_.input().forward(batch));
  for (HiddenLayer* layer : model_.hidden()) {
    activations_.push_back(h);
    h = &layer->forward(*h);
  }
  activations_.push_back(h);
  return *h;
}

double Trainer::train_step(const SparseBatch& batch, size_t global_batch) {
  const Tensor& h = forward_hidden(batch);
  const double loss = model_.output().forward_backward(h, batch, step_, &grad_);
  // The loss is a sum over points; Adam is invariant to the gradient's scale, but the mean keeps
  // gradients comparable across batch sizes (as in the PyTorch baseline). Replicas scale by the
  // global batch, so their summed gradients are the global batch's mean.
  if (global_batch == 0) global_batch = batch.size();
  const float scale = global_batch > 0 ? 1.0f / static_cast<float>(global_batch) : 0.0f;
  for (Parameter* p : model_.output().parameters())
    for (size_t i = 0; i < p->grad.values.size(); ++i) p->grad.values.data()[i] *= scale;
  for (size_t i = 0; i < grad_.size(); ++i) grad_.data()[i] *= scale;
  const auto hidden = model_.hidden();
  const Tensor* g = &grad_;
  if (!hidden.empty() && active_group(options_.parallel.model)) {
    // Replicated hidden layers need the full gradient on every rank.
    options_.parallel.model->all_reduce(grad_.span()).wait();
  }
  for (size_t l = hidden.size(); l-- > 0;) g = &hidden[l]->backward(*activations_[l], *g);
  if (hidden.empty()) {
    g = &input_gradient(*g);
  } else if (model_.input().placement().is_sliced()) {
    const auto bounds = model_.input().placement().bounds(g->cols());
    const int me = model_.input().placement().rank();
    grad_slice_.resize(g->rows(), bounds[me + 1] - bounds[me]);
    for (size_t i = 0; i < g->rows(); ++i) std::copy_n(g->row(i) + bounds[me], grad_slice_.cols(), grad_slice_.row(i));
    g = &grad_slice_;
  }
  model_.input().backward(batch, *g);
  sum_gradients_over_replicas();
  optimizer_.step();
  ++step_;
  for (const auto& layer : model_.layers()) layer->after_update(step_);
  return loss;
}

double Trainer::loss(const SparseBatch& batch) {
  return model_.output().forward_backward(forward_hidden(batch), batch, step_, nullptr);
}

FitResult Trainer::fit_epoch(const data::Dataset& data, const FitOptions& options) {
  FRUGAL_CHECK(data.num_features <= model_.input().in_features(),
               fmt::format("{}: data has {} features, the model's input takes {}", data.source,
                           data.num_features, model_.input().in_features()));
  FRUGAL_CHECK(data.num_labels <= model_.output().out_features(),
               fmt::format("{}: data has {} labels, the model's output has {}", data.source, data.num_labels,
                           model_.output().out_features()));
  comm::Communicator* replicas = options_.parallel.data;
  const size_t shards = active_group(replicas) ? replicas->size() : 1;
  const size_t shard = active_group(replicas) ? replicas->rank() : 0;
  data::BatchLoader loader(data, {.batch = options.batch, .shuffle = options.shuffle, .seed = options.seed,
                                  .shard = shard, .num_shards = shards});
  Progress progress(fmt::format("{} epoch {}", options.label, epoch_ + 1), loader.num_points(), options.progress);
  FitResult result;
  SparseBatch batch;
  double loss_sum = 0.0;
  const uint64_t logits_before = model_.output().logits_computed();
  const uint64_t sent_before = wire_bytes(true), received_before = wire_bytes(false);
  const auto start = std::chrono::steady_clock::now();
  size_t global = 0;
  while ((options.max_steps == 0 || result.steps < options.max_steps) && loader.next(batch, &global)) {
    loss_sum += train_step(batch, global);
    result.samples += batch.size();
    ++result.steps;
    progress.update(result.samples, result.samples > 0 ? loss_sum / result.samples : 0.0);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes_sent = wire_bytes(true) - sent_before;
  result.bytes_received = wire_bytes(false) - received_before;
  result.group_samples = result.samples;
  if (active_group(replicas)) {  // the epoch's loss over all replicas' points
    std::vector<float> sums{static_cast<float>(loss_sum), static_cast<float>(result.samples)};
    replicas->all_reduce(sums).wait();
    loss_sum = sums[0];
    result.samples = static_cast<size_t>(std::llround(sums[1]));
  }
  result.loss = result.samples > 0 ? loss_sum / result.samples : 0.0;
  result.samples_per_s = result.seconds > 0 ? result.samples / result.seconds : 0.0;
  result.logits_per_sample = result.group_samples > 0
      ? static_cast<double>(model_.output().logits_computed() - logits_before) / result.group_samples : 0.0;
  ++epoch_;
  progress.finish(fmt::format("done: {} samples in {:.2f} s ({:.0f} samples/s), loss {:.4f}", result.samples,
                              result.seconds, result.samples_per_s, result.loss));
  return result;
}

EvalResult Trainer::evaluate(const data::Dataset& data, const EvalOptions& options) {
  PrecisionAtK metric(options.k);
  data::BatchLoader loader(data, {.batch = options.batch, .shuffle = false});
  Progress progress("evaluate", loader.num_points(), options.progress);
  SparseBatch batch;
  std::vector<uint32_t> top;
  std::vector<float> scores;
  const auto start = std::chrono::steady_clock::now();
  while (loader.next(batch)) {
    model_.output().top_k(forward_hidden(batch), metric.max_k(), top, scores);
    metric.add(batch, top);
    progress.update(metric.points(), 0.0);
  }
  EvalResult result;
  result.precision = metric.values();
  result.samples = metric.points();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace frugal
