#include "core/trainer.h"

#include <chrono>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

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
}

const Tensor& Trainer::forward_hidden(const SparseBatch& batch) {
  activations_.clear();
  const Tensor* h = &model_.input().forward(batch);
  for (HiddenLayer* layer : model_.hidden()) {
    activations_.push_back(h);
    h = &layer->forward(*h);
  }
  activations_.push_back(h);
  return *h;
}

double Trainer::train_step(const SparseBatch& batch) {
  const Tensor& h = forward_hidden(batch);
  const double loss = model_.output().forward_backward(h, batch, step_, &grad_);
  // The loss is a sum over points; Adam is invariant to the gradient's scale, but the mean keeps
  // gradients comparable across batch sizes (as in the PyTorch baseline).
  const float scale = batch.size() > 0 ? 1.0f / static_cast<float>(batch.size()) : 0.0f;
  for (Parameter* p : model_.output().parameters())
    for (size_t i = 0; i < p->grad.values.size(); ++i) p->grad.values.data()[i] *= scale;
  for (size_t i = 0; i < grad_.size(); ++i) grad_.data()[i] *= scale;
  const auto hidden = model_.hidden();
  const Tensor* g = &grad_;
  for (size_t l = hidden.size(); l-- > 0;) g = &hidden[l]->backward(*activations_[l], *g);
  model_.input().backward(batch, *g);
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
  data::BatchLoader loader(data, {.batch = options.batch, .shuffle = options.shuffle, .seed = options.seed});
  Progress progress(fmt::format("{} epoch {}", options.label, epoch_ + 1), loader.num_points(), options.progress);
  FitResult result;
  SparseBatch batch;
  double loss_sum = 0.0;
  const uint64_t logits_before = model_.output().logits_computed();
  const auto start = std::chrono::steady_clock::now();
  while (loader.next(batch)) {
    loss_sum += train_step(batch);
    result.samples += batch.size();
    ++result.steps;
    progress.update(result.samples, loss_sum / result.samples);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.loss = result.samples > 0 ? loss_sum / result.samples : 0.0;
  result.samples_per_s = result.seconds > 0 ? result.samples / result.seconds : 0.0;
  result.logits_per_sample =
      result.samples > 0 ? static_cast<double>(model_.output().logits_computed() - logits_before) / result.samples : 0.0;
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

void Trainer::save_state(cereal::BinaryOutputArchive& ar) const {
  ar(step_, epoch_);
  optimizer_.save_state(ar);
}

void Trainer::load_state(cereal::BinaryInputArchive& ar) {
  ar(step_, epoch_);
  optimizer_.load_state(ar);
}

}  // namespace frugal
