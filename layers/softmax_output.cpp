#include "layers/softmax_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <cereal/archives/binary.hpp>
#include <tuple>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/communicator.h"
#include "core/check.h"
#include "core/rng.h"
#include "kernels/matmul.h"
#include "layers/init.h"

namespace frugal::layers {
namespace {

template <class F>
void parallel_rows(size_t n, F&& body) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) body(i);
  });
}

// Best first: higher score, then lower label id.
bool better(const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& c) {
  return a.first != c.first ? a.first > c.first : a.second < c.second;
}

// The k best of n (score, label) candidates produced by `entry(j)`, best first, through a k-entry
// min-heap: one pass, no scratch of the candidates' size.
template <class Entry>
void heap_top_k(size_t n, size_t k, Entry entry, std::vector<std::pair<float, uint32_t>>& heap) {
  heap.clear();
  heap.reserve(k + 1);
  for (size_t j = 0; j < n; ++j) {
    const std::pair<float, uint32_t> e = entry(j);
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
}

}  // namespace

void SoftmaxOutputOptions::validate() const {
  FRUGAL_CHECK(in > 0, fmt::format("SoftmaxOutput: in must be > 0, got {}", in));
  FRUGAL_CHECK(out > 0 && out <= UINT32_MAX, fmt::format("SoftmaxOutput: out must be in 1..2^32-1, got {}", out));
  if (sampler == Sampler::lsh) lsh.validate();
}

SoftmaxOutput::SoftmaxOutput(const Options& options) : options_(options), accumulator_(options.out) {
  options_.validate();
  std::tie(begin_, end_) = options_.placement.own_slice(options_.out);
  const size_t local = end_ - begin_;
  weight_ = {"softmax.weight", Tensor(local, options_.in), {}, 0, begin_, options_.out, options_.in};
  bias_ = {"softmax.bias", Tensor(local, 1), {}, 0, begin_, options_.out, 1};
  const Rng rng = Rng(options_.seed).split(0x50);
  init_uniform(weight_.value, options_.in, rng.split(0), begin_);
  init_uniform(bias_.value, options_.in, rng.split(1), begin_);
  if (options_.sampler == Sampler::lsh) {
    // `negatives` is per point over all labels: a slice draws its share (at least one).
    lsh::LshOptions o = options_.lsh;
    if (o.negatives > 0)
      o.negatives = std::max<size_t>(1, (o.negatives * local + options_.out - 1) / options_.out);
    sampler_ = std::make_unique<lsh::LshSampler>(o, options_.in, local,
                                                 Rng(options_.seed).split(0x15).split(options_.placement.rank()).next_u64());
  }
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

template <class Logits, class Count, class Positions>
double SoftmaxOutput::distributed_xent(const SparseBatch& batch, Logits z, Count n, Positions pos) {
  const size_t b = batch.size();
  comm::Communicator* group = options_.placement.is_sliced() ? options_.placement.group : nullptr;
  max_.assign(b, -INFINITY);
  parallel_rows(b, [&](size_t i) {
    const float* zi = z(i);
    for (size_t j = 0, nj = n(i); j < nj; ++j) max_[i] = std::max(max_[i], zi[j]);
  });
  if (group != nullptr) group->all_reduce(max_, comm::ReduceOp::max).wait();
  // Per point: sum of exp(z - max) over local logits, and the sum of the local labels' logits.
  sums_.assign(2 * b, 0.0f);
  parallel_rows(b, [&](size_t i) {
    const float* zi = z(i);
    double s = 0.0;
    for (size_t j = 0, nj = n(i); j < nj; ++j) s += std::exp(static_cast<double>(zi[j] - max_[i]));
    double y = 0.0;
    for (const uint32_t p : pos(i)) y += zi[p];
    sums_[i] = static_cast<float>(s);
    sums_[b + i] = static_cast<float>(y);
  });
  if (group != nullptr) group->all_reduce(sums_, comm::ReduceOp::sum).wait();
  std::vector<double> losses(b, 0.0);
  parallel_rows(b, [&](size_t i) {
    float* zi = z(i);
    const size_t nj = n(i), labels = batch.labels_of(i).size();
    if (labels == 0) {  // nothing to learn from a point without labels
      std::fill(zi, zi + nj, 0.0f);
      return;
    }
    const float w = 1.0f / static_cast<float>(labels);
    losses[i] = std::log(static_cast<double>(sums_[i])) + max_[i] - w * static_cast<double>(sums_[b + i]);
    const float inv = 1.0f / sums_[i];
    for (size_t j = 0; j < nj; ++j) zi[j] = std::exp(zi[j] - max_[i]) * inv;
    for (const uint32_t p : pos(i)) zi[p] -= w;
  });
  return std::accumulate(losses.begin(), losses.end(), 0.0);
}

double SoftmaxOutput::exact_forward_backward(const Tensor& in, const SparseBatch& batch, Tensor* grad_in) {
  const size_t b = in.rows(), n = end_ - begin_, d = options_.in;
  full_logits_.resize(b, n);
  kernels::matmul(in.data(), false, weight_.value.data(), true, full_logits_.data(), b, n, d);
  positions_.resize(b);
  parallel_rows(b, [&](size_t i) {
    float* z = full_logits_.row(i);
    for (size_t j = 0; j < n; ++j) z[j] += bias_.value.data()[j];
    positions_[i].clear();
    for (const uint32_t l : batch.labels_of(i))
      if (l >= begin_ && l < end_) positions_[i].push_back(l - static_cast<uint32_t>(begin_));
  });
  const double loss = distributed_xent(
      batch, [&](size_t i) { return full_logits_.row(i); }, [&](size_t) { return n; },
      [&](size_t i) -> const std::vector<uint32_t>& { return positions_[i]; });
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
    sampler_->sample(in, &batch, static_cast<uint32_t>(begin_), step, active_);
  }
  kernels::active_logits(in, active_, weight_.value, bias_.value, logits_);
  // Random negatives stand for the labels outside the set: their logQ correction enters the
  // softmax (and so the gradient's probabilities); dLoss/dz = dLoss/dz' as the offset is constant.
  if (!active_.logit_offsets.empty())
    for (size_t e = 0; e < logits_.size(); ++e) logits_[e] += active_.logit_offsets[e];
  // Positions of the point's own labels inside its active set (the sampler put them first; an
  // override may place them anywhere).
  positions_.resize(b);
  parallel_rows(b, [&](size_t i) {
    const uint64_t start = active_.offsets[i];
    const uint32_t* ids = active_.ids.data() + start;
    const size_t n = active_.offsets[i + 1] - start;
    positions_[i].clear();
    for (const uint32_t l : batch.labels_of(i)) {
      if (l < begin_ || l >= end_) continue;
      const auto it = std::find(ids, ids + n, l - static_cast<uint32_t>(begin_));
      FRUGAL_CHECK(it != ids + n, fmt::format("SoftmaxOutput: label {} of point {} is not in its active set", l, i));
      positions_[i].push_back(static_cast<uint32_t>(it - ids));
    }
  });
  const double loss = distributed_xent(
      batch, [&](size_t i) { return logits_.data() + active_.offsets[i]; },
      [&](size_t i) { return active_.offsets[i + 1] - active_.offsets[i]; },
      [&](size_t i) -> const std::vector<uint32_t>& { return positions_[i]; });
  if (grad_in == nullptr) return loss;
  logits_computed_ += active_.total();
  kernels::active_backward_input(active_, logits_, weight_.value, *grad_in);
  accumulator_.accumulate(active_.offsets, active_.ids.data(), logits_.data(), in, weight_.grad, &bias_.grad);
  return loss;
}

void SoftmaxOutput::top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  k = std::min(k, options_.out);
  if (!options_.placement.is_sliced()) return local_top_k(in, k, labels, scores);
  // Each rank scores its own labels; the merged candidates hold the global top k exactly.
  comm::Communicator& group = *options_.placement.group;
  const size_t b = in.rows();
  std::vector<uint32_t> my_labels;
  std::vector<float> my_scores;
  local_top_k(in, k, my_labels, my_scores);
  const size_t my_k = b == 0 ? 0 : my_labels.size() / b;
  std::vector<float> mine(2 * my_labels.size());
  for (size_t j = 0; j < my_labels.size(); ++j) {
    mine[2 * j] = my_scores[j];
    std::memcpy(&mine[2 * j + 1], &my_labels[j], sizeof(float));  // ids travel as raw bits
  }
  const auto bounds = options_.placement.bounds(options_.out);
  std::vector<size_t> counts(group.size()), ks(group.size());
  for (int r = 0; r < group.size(); ++r) {
    ks[r] = std::min(k, bounds[r + 1] - bounds[r]);
    counts[r] = 2 * b * ks[r];
  }
  FRUGAL_CHECK(ks[group.rank()] == my_k, "SoftmaxOutput: top-k sizes disagree");
  std::vector<float> all(std::accumulate(counts.begin(), counts.end(), size_t{0}));
  group.all_gatherv(mine, all, counts).wait();
  const auto offsets = comm::displacements(counts);
  labels.resize(b * k);
  scores.resize(b * k);
  std::vector<std::pair<float, uint32_t>> cand;
  for (size_t i = 0; i < b; ++i) {
    cand.clear();
    for (int r = 0; r < group.size(); ++r)
      for (size_t j = 0; j < ks[r]; ++j) {
        const float* e = &all[offsets[r] + 2 * (i * ks[r] + j)];
        uint32_t id = 0;
        std::memcpy(&id, e + 1, sizeof id);
        cand.emplace_back(e[0], id);
      }
    std::sort(cand.begin(), cand.end(), better);
    for (size_t j = 0; j < k; ++j) {
      labels[i * k + j] = cand[j].second;
      scores[i * k + j] = cand[j].first;
    }
  }
}

void SoftmaxOutput::set_inference(const InferenceOptions& options) {
  inference_ = options;
  if (options.mode != Inference::lsh || sampler_ != nullptr || inference_sampler_ != nullptr) return;
  // Trained with the exact softmax: hash its label rows with the LSH defaults for this slice.
  const size_t local = end_ - begin_;
  lsh::LshOptions o;
  o.negatives = 0;
  o.family = lsh::Dwta{.k = lsh::default_k(lsh::Dwta{}, o.tables, local)};
  inference_sampler_ = std::make_unique<lsh::LshSampler>(
      o, options_.in, local, Rng(options_.seed).split(0x1f5).split(options_.placement.rank()).next_u64());
}

void SoftmaxOutput::lsh_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  lsh::LshSampler& sampler = sampler_ != nullptr ? *sampler_ : *inference_sampler_;
  sampler.ensure_built(weight_.value);
  // A slice keeps its share of the candidates (at least 1).
  const size_t cap = inference_.candidates == 0 ? 0
      : std::max<size_t>(1, (inference_.candidates * (end_ - begin_) + options_.out - 1) / options_.out);
  sampler.sample(in, nullptr, static_cast<uint32_t>(begin_), 0, candidates_, cap);
  kernels::active_logits(in, candidates_, weight_.value, bias_.value, logits_);
  labels_scored_ += candidates_.total();
  const size_t b = in.rows(), n = end_ - begin_;
  k = std::min(k, n);
  labels.resize(b * k);
  scores.resize(b * k);
  parallel_rows(b, [&](size_t i) {
    const uint64_t start = candidates_.offsets[i];
    const size_t found = candidates_.offsets[i + 1] - start;
    std::vector<std::pair<float, uint32_t>> heap;
    heap_top_k(found, k, [&](size_t j) { return std::pair{logits_[start + j], candidates_.ids[start + j]}; }, heap);
    // Fewer candidates than k: the rest are labels the tables did not return, ranked last (-inf),
    // lowest ids first, so every point still gets k distinct labels.
    for (uint32_t j = 0; heap.size() < k; ++j) {
      const uint32_t* ids = candidates_.ids.data() + start;
      if (std::find(ids, ids + found, j) == ids + found) heap.emplace_back(-INFINITY, j);
    }
    for (size_t j = 0; j < k; ++j) {
      labels[i * k + j] = heap[j].second + static_cast<uint32_t>(begin_);
      scores[i * k + j] = heap[j].first;
    }
  });
}

void SoftmaxOutput::local_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  if (inference_.mode == Inference::lsh) return lsh_top_k(in, k, labels, scores);
  const size_t b = in.rows(), n = end_ - begin_, d = options_.in;
  k = std::min(k, n);
  labels_scored_ += b * n;
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
      std::vector<std::pair<float, uint32_t>> heap;
      heap_top_k(n, k, [&](size_t j) { return std::pair{z[j], static_cast<uint32_t>(j)}; }, heap);
      for (size_t j = 0; j < k; ++j) {
        labels[(r0 + i) * k + j] = heap[j].second + static_cast<uint32_t>(begin_);
        scores[(r0 + i) * k + j] = heap[j].first;
      }
    });
  }
}

void SoftmaxOutput::after_update(uint64_t) {
  // The optimizer changed exactly the rows that had a gradient (after any data-parallel union).
  if (sampler_ != nullptr) sampler_->mark_changed(weight_.grad.rows);
}

void SoftmaxOutput::set_label_counts(std::span<const uint32_t> counts) {
  FRUGAL_CHECK(counts.size() <= options_.out,
               fmt::format("SoftmaxOutput: {} label counts for {} labels", counts.size(), options_.out));
  if (sampler_ == nullptr) return;
  std::vector<uint32_t> local(end_ - begin_, 0);
  for (size_t j = begin_; j < std::min(end_, counts.size()); ++j) local[j - begin_] = counts[j];
  sampler_->set_label_counts(local);
}

void SoftmaxOutput::accumulate_centroids(const Tensor& in, const SparseBatch& batch) {
  FRUGAL_CHECK(in.cols() == options_.in && in.rows() == batch.size(), "SoftmaxOutput: centroid input has the wrong shape");
  if (centroid_sum_.rows() != end_ - begin_) {
    centroid_sum_ = Tensor(end_ - begin_, options_.in);
    centroid_points_.assign(end_ - begin_, 0);
  }
  for (size_t i = 0; i < batch.size(); ++i)
    for (const uint32_t l : batch.labels_of(i)) {
      if (l < begin_ || l >= end_) continue;
      ++centroid_points_[l - begin_];
      float* row = centroid_sum_.row(l - begin_);
      const float* h = in.row(i);
      for (size_t c = 0; c < options_.in; ++c) row[c] += h[c];
    }
}

void SoftmaxOutput::finish_centroids(float scale, std::span<const float> mean) {
  FRUGAL_CHECK(scale > 0 && std::isfinite(scale), fmt::format("SoftmaxOutput: centroid scale must be > 0, got {}", scale));
  FRUGAL_CHECK(mean.size() == options_.in, fmt::format("SoftmaxOutput: mean hidden vector has {} entries, expected {}",
                                                       mean.size(), options_.in));
  if (centroid_sum_.rows() != end_ - begin_) return;  // no point reached this slice
  parallel_rows(end_ - begin_, [&](size_t j) {
    if (centroid_points_[j] == 0) return;  // a label without points keeps its random row
    float* c = centroid_sum_.row(j);
    const float inv = 1.0f / static_cast<float>(centroid_points_[j]);
    double norm = 0.0;
    for (size_t k = 0; k < options_.in; ++k) {
      c[k] = c[k] * inv - mean[k];
      norm += static_cast<double>(c[k]) * c[k];
    }
    if (norm <= 0.0) return;
    const auto f = static_cast<float>(scale / std::sqrt(norm));
    float* w = weight_.value.row(j);
    double shift = 0.0;
    for (size_t k = 0; k < options_.in; ++k) {
      w[k] = f * c[k];
      shift += static_cast<double>(w[k]) * mean[k];
    }
    bias_.value.data()[j] = static_cast<float>(-shift);
  });
  centroid_sum_ = Tensor();
  centroid_points_.clear();
  if (sampler_ != nullptr) sampler_->mark_all_changed();
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
