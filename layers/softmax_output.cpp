#include "layers/softmax_output.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/matmul.h"
#include "layers/init.h"

namespace frugal::layers {
namespace {

// Softmax cross-entropy of one point over `n` logits, `labels` of which are targets (positions
// into the logits), each with weight 1/|labels|. Overwrites the logits with dLoss/dlogit.
double softmax_xent(float* z, size_t n, const uint32_t* labels, size_t num_labels) {
  if (num_labels == 0) {
    std::fill(z, z + n, 0.0f);
    return 0.0;
  }
  float mx = -INFINITY;
  for (size_t j = 0; j < n; ++j) mx = std::max(mx, z[j]);
  double sum = 0.0;
  for (size_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(z[j] - mx));
  const double log_z = std::log(sum) + mx;
  const float w = 1.0f / static_cast<float>(num_labels);
  double loss = 0.0;
  for (size_t l = 0; l < num_labels; ++l) loss -= w * (z[labels[l]] - log_z);
  const float inv = static_cast<float>(1.0 / sum);
  for (size_t j = 0; j < n; ++j) z[j] = std::exp(z[j] - mx) * inv;
  for (size_t l = 0; l < num_labels; ++l) z[labels[l]] -= w;
  return loss;
}

template <class F>
void parallel_rows(size_t n, F&& body) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) body(i);
  });
}

}  // namespace

void SoftmaxOutputOptions::validate() const {
  FRUGAL_CHECK(in > 0, fmt::format("SoftmaxOutput: in must be > 0, got {}", in));
  FRUGAL_CHECK(out > 0 && out <= UINT32_MAX, fmt::format("SoftmaxOutput: out must be in 1..2^32-1, got {}", out));
  if (sampler == Sampler::lsh) lsh.validate();
}

SoftmaxOutput::SoftmaxOutput(const Options& options) : options_(options), accumulator_(options.out) {
  options_.validate();
  weight_ = {"softmax.weight", Tensor(options_.out, options_.in), {}};
  bias_ = {"softmax.bias", Tensor(options_.out, 1), {}};
  init_uniform(weight_.value, bias_.value, options_.in, Rng(options_.seed).split(0x50));
  if (options_.sampler == Sampler::lsh)
    sampler_ = std::make_unique<lsh::LshSampler>(options_.lsh, options_.in, options_.out,
                                                 Rng(options_.seed).split(0x15).next_u64());
}

std::string SoftmaxOutput::kind() const { return options_.sampler == Sampler::lsh ? "LshSoftmax" : "Softmax"; }

std::string SoftmaxOutput::describe() const {
  if (options_.sampler == Sampler::exact) return fmt::format("Softmax({} -> {}, exact)", options_.in, options_.out);
  return fmt::format("LshSoftmax({} -> {}, {}, {} tables, bucket {})", options_.in, options_.out,
                     lsh::family_name(options_.lsh.family), options_.lsh.tables, options_.lsh.bucket_capacity);
}

double SoftmaxOutput::forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in) {
  FRUGAL_CHECK(in.cols() == options_.in && in.rows() == batch.size(),
               fmt::format("SoftmaxOutput: input is {}x{}, expected {}x{}", in.rows(), in.cols(), batch.size(), options_.in));
  for (const uint32_t l : batch.label_ids)
    FRUGAL_CHECK(l < options_.out, fmt::format("SoftmaxOutput: label id {} >= number of labels {}", l, options_.out));
  if (options_.sampler == Sampler::exact) return exact_forward_backward(in, batch, grad_in);
  return sampled_forward_backward(in, batch, step, grad_in);
}

double SoftmaxOutput::exact_forward_backward(const Tensor& in, const SparseBatch& batch, Tensor* grad_in) {
  const size_t b = in.rows(), n = options_.out, d = options_.in;
  full_logits_.resize(b, n);
  kernels::matmul(in.data(), false, weight_.value.data(), true, full_logits_.data(), b, n, d);
  std::vector<double> losses(b);
  parallel_rows(b, [&](size_t i) {
    float* z = full_logits_.row(i);
    for (size_t j = 0; j < n; ++j) z[j] += bias_.value.data()[j];
    const auto labels = batch.labels_of(i);
    losses[i] = softmax_xent(z, n, labels.data(), labels.size());
  });
  const double loss = std::accumulate(losses.begin(), losses.end(), 0.0);
  if (grad_in == nullptr) return loss;
  logits_computed_ += b * n;
  // full_logits_ now holds dLoss/dz.
  grad_in->resize(b, d);
  kernels::matmul(full_logits_.data(), false, weight_.value.data(), false, grad_in->data(), b, d, n);
  weight_.grad.rows.resize(n);
  std::iota(weight_.grad.rows.begin(), weight_.grad.rows.end(), 0u);
  weight_.grad.values.resize(n, d);
  kernels::matmul(full_logits_.data(), true, in.data(), false, weight_.grad.values.data(), n, d, b);
  bias_.grad.rows = weight_.grad.rows;
  bias_.grad.values.resize(n, 1);
  parallel_rows(n, [&](size_t j) {
    float s = 0.0f;
    for (size_t i = 0; i < b; ++i) s += full_logits_.at(i, j);
    bias_.grad.values.data()[j] = s;
  });
  return loss;
}

double SoftmaxOutput::sampled_forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in) {
  const size_t b = in.rows();
  if (override_ != nullptr) {
    FRUGAL_CHECK(override_->num_samples() == b, "SoftmaxOutput: override active sets do not match the batch");
    active_ = *override_;
  } else {
    sampler_->maybe_rebuild(weight_.value, step);
    sampler_->sample(in, &batch, 0, step, active_);
  }
  kernels::active_logits(in, active_, weight_.value, bias_.value, logits_);
  std::vector<double> losses(b);
  parallel_rows(b, [&](size_t i) {
    const uint64_t start = active_.offsets[i];
    const size_t n = active_.offsets[i + 1] - start;
    // Positions of the point's labels inside its active set (the sampler put them first; an
    // override may place them anywhere).
    std::vector<uint32_t> pos;
    for (const uint32_t l : batch.labels_of(i)) {
      const uint32_t* ids = active_.ids.data() + start;
      const auto it = std::find(ids, ids + n, l);
      FRUGAL_CHECK(it != ids + n, fmt::format("SoftmaxOutput: label {} of point {} is not in its active set", l, i));
      pos.push_back(static_cast<uint32_t>(it - ids));
    }
    losses[i] = softmax_xent(logits_.data() + start, n, pos.data(), pos.size());
  });
  const double loss = std::accumulate(losses.begin(), losses.end(), 0.0);
  if (grad_in == nullptr) return loss;
  logits_computed_ += active_.total();
  kernels::active_backward_input(active_, logits_, weight_.value, *grad_in);
  accumulator_.accumulate(active_.offsets, active_.ids.data(), logits_.data(), in, weight_.grad, &bias_.grad);
  return loss;
}

void SoftmaxOutput::top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  const size_t b = in.rows(), n = options_.out, d = options_.in;
  k = std::min(k, n);
  labels.resize(b * k);
  scores.resize(b * k);
  // Score in chunks of rows so that a million labels never need more than ~64 MB of logits.
  const size_t chunk = std::max<size_t>(1, (size_t{16} << 20) / n);
  for (size_t r0 = 0; r0 < b; r0 += chunk) {
    const size_t rows = std::min(chunk, b - r0);
    full_logits_.resize(rows, n);
    kernels::matmul(in.row(r0), false, weight_.value.data(), true, full_logits_.data(), rows, n, d);
    parallel_rows(rows, [&](size_t i) {
      float* z = full_logits_.row(i);
      for (size_t j = 0; j < n; ++j) z[j] += bias_.value.data()[j];
      // A k-entry min-heap of (score, label): one pass, no label-sized scratch.
      auto better = [](const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& c) {
        return a.first != c.first ? a.first > c.first : a.second < c.second;
      };
      std::vector<std::pair<float, uint32_t>> heap;
      heap.reserve(k + 1);
      for (size_t j = 0; j < n; ++j) {
        const std::pair<float, uint32_t> e{z[j], static_cast<uint32_t>(j)};
        if (heap.size() < k) {
          heap.push_back(e);
          std::push_heap(heap.begin(), heap.end(), better);
        } else if (better(e, heap.front())) {
          std::pop_heap(heap.begin(), heap.end(), better);
          heap.back() = e;
          std::push_heap(heap.begin(), heap.end(), better);
        }
      }
      std::sort_heap(heap.begin(), heap.end(), better);
      for (size_t j = 0; j < k; ++j) {
        labels[(r0 + i) * k + j] = heap[j].second;
        scores[(r0 + i) * k + j] = heap[j].first;
      }
    });
  }
}

void SoftmaxOutput::save_state(cereal::BinaryOutputArchive& ar) const {
  const bool has_sampler = sampler_ != nullptr;
  ar(has_sampler);
  if (has_sampler) sampler_->save(ar);
}

void SoftmaxOutput::load_state(cereal::BinaryInputArchive& ar) {
  bool has_sampler = false;
  ar(has_sampler);
  FRUGAL_CHECK(has_sampler == (sampler_ != nullptr), "checkpoint: sampler kind differs from the model's");
  if (has_sampler) sampler_->load(ar);
}

}  // namespace frugal::layers
