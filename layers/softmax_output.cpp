#include "layers/softmax_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include <cereal/archives/binary.hpp>
#include <tuple>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/check.h"
#include "core/parallel_rows.h"
#include "core/rng.h"
#include "core/step_profile.h"
#include "layers/init.h"

namespace frugal::layers {
namespace {

// n entries of host memory from p seen as a rows x cols tensor, no copy: the ranking's host inputs
// (the blocks of bf16 scoring) and its results, which leave the step (a device stages them).
template <class T>
Tensor host_tensor(const T* p, size_t rows, size_t cols, Dtype dtype) {
  return Tensor::wrap(const_cast<T*>(p), rows, cols, dtype);
}

}  // namespace

void SoftmaxOutputOptions::validate() const {
  FRUGAL_CHECK(in > 0, fmt::format("SoftmaxOutput: in must be > 0, got {}", in));
  FRUGAL_CHECK(out > 0 && out <= UINT32_MAX, fmt::format("SoftmaxOutput: out must be in 1..2^32-1, got {}", out));
  if (sampler == Sampler::lsh) lsh.validate();
}

SoftmaxOutput::~SoftmaxOutput() = default;

SoftmaxOutput::SoftmaxOutput(const Options& options) : options_(options) {
  options_.validate();
  std::tie(begin_, end_) = options_.placement.own_slice(options_.out);
  const size_t local = end_ - begin_;
  weight_ = {"softmax.weight", Tensor(local, options_.in), {}, 0, begin_, options_.out, options_.in};
  weight_.row_sparse = options_.sampler == Sampler::lsh;  // a sampled step touches its active labels' rows
  bias_ = {"softmax.bias", Tensor(local, 1), {}, 0, begin_, options_.out, 1};
  const Rng rng = Rng(options_.seed).split(0x50);
  init_uniform(weight_.value, options_.in, rng.split(0), begin_);
  init_uniform(bias_.value, options_.in, rng.split(1), begin_);
  if (options_.sampler == Sampler::lsh && options_.storage != Dtype::f32)
    weight_.value = converted(weight_.value, options_.storage);
  // An empty slice (slice weight 0) has no tables: its active sets are empty.
  if (options_.sampler == Sampler::lsh && local > 0) {
    // `negatives` and the cap `max_active` are per point over all labels: a slice takes its share
    // (at least one negative; a cap of at least min_active).
    lsh::LshOptions o = options_.lsh;
    if (o.negatives > 0)
      o.negatives = std::max<size_t>(1, (o.negatives * local + options_.out - 1) / options_.out);
    if (o.max_active > 0)
      o.max_active = std::max<size_t>({o.min_active, o.negatives + 1, (o.max_active * local + options_.out - 1) / options_.out});
    sampler_ = std::make_unique<lsh::LshSampler>(o, options_.in, local,
                                                 Rng(options_.seed).split(0x15).split(options_.placement.rank()).next_u64());
  }
}

std::string SoftmaxOutput::kind() const { return options_.sampler == Sampler::lsh ? "LshSoftmax" : "Softmax"; }

std::string SoftmaxOutput::describe() const {
  if (options_.sampler == Sampler::exact) return fmt::format("Softmax({} -> {}, exact)", options_.in, options_.out);
  return fmt::format("LshSoftmax({} -> {}, {}, {} tables, bucket {}{})", options_.in, options_.out,
                     lsh::family_name(options_.lsh.family), options_.lsh.tables, options_.lsh.bucket_capacity,
                     weight_.value.dtype() == Dtype::f32 ? "" : ", bf16");
}

double SoftmaxOutput::forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in,
                                       float grad_scale) {
  // The backward part opens a scope of its own; the sampler's hashing, sets and rebuilds too.
  const profile::Scope phase(profile::Phase::output_forward);
  FRUGAL_CHECK(in.cols() == options_.in && in.rows() == batch.size(),
               fmt::format("SoftmaxOutput: input is {}x{}, expected {}x{}", in.rows(), in.cols(), batch.size(), options_.in));
  for (const uint32_t l : batch.label_ids)
    FRUGAL_CHECK(l < options_.out, fmt::format("SoftmaxOutput: label id {} >= number of labels {}", l, options_.out));
  if (options_.sampler == Sampler::exact) return exact_forward_backward(in, batch, grad_in, grad_scale);
  return sampled_forward_backward(in, batch, step, grad_in, grad_scale);
}

double SoftmaxOutput::distributed_xent(const SparseBatch& batch, Tensor& z, const Tensor& offsets,
                                       float grad_scale, const Tensor* labels_first) {
  const size_t b = batch.size();
  comm::Communicator* group = options_.placement.is_sliced() ? options_.placement.group : nullptr;
  Backend& be = backend();
  for (Tensor* t : {&pos_offsets_, &position_ids_, &label_offsets_, &max_, &sums_, &losses_}) keep_on(*t, be);
  // The labels' part of the batch goes where the ops run: where each point's labels sit among its
  // logits (first, as the sampler put them there: nothing to send), and how many labels it has in
  // all (the same offsets when this rank holds every label, each once).
  XentTensors xb{.offsets = &offsets, .pos_offsets = labels_first, .positions = nullptr,
                 .label_offsets = &label_offsets_, .grad_scale = grad_scale};
  if (labels_first == nullptr) {
    position_offsets_.assign(1, 0);
    position_list_.clear();
    for (size_t i = 0; i < b; ++i) {
      position_list_.insert(position_list_.end(), positions_[i].begin(), positions_[i].end());
      position_offsets_.push_back(position_list_.size());
    }
    assign_values(pos_offsets_, std::span<const uint64_t>(position_offsets_));
    assign_values(position_ids_, std::span<const uint32_t>(position_list_));
    xb.pos_offsets = &pos_offsets_;
    xb.positions = &position_ids_;
  }
  if (labels_first != nullptr && begin_ == 0 && end_ == options_.out)
    xb.label_offsets = labels_first;
  else
    assign_values(label_offsets_, std::span<const uint64_t>(batch.label_offsets));
  // Per point: the largest logit, then the sum of exp(z - max) over the logits and the sum of the
  // labels' logits.
  be.xent_max(z, xb, max_);
  be.xent_sums(z, xb, max_, sums_);
  if (group != nullptr) combine_normalizer(*group, b);
  be.xent_loss_grad(z, xb, max_, sums_, losses_);
  // The loss leaves the step: 8 bytes a point, summed on the host in point order.
  Tensor copy;
  const std::span<const double> losses = host_view(losses_, copy).f64();
  return std::accumulate(losses.begin(), losses.end(), 0.0);
}

void SoftmaxOutput::combine_normalizer(comm::Communicator& group, size_t b) {
  // Each rank's sums are relative to its own largest logit. One all-gather of (max, sum, label
  // sum) per point and rank, then every rank combines them alike, in rank order: the global max M,
  // sum_r s_r exp(m_r - M) and sum_r l_r. One round trip per step where a max all-reduce followed
  // by a sum all-reduce took two (each a ring of 2(R-1) hops). The wire takes host memory: on a
  // device, max and sums come down (12 bytes a point) and the combined values go back up.
  Tensor max_copy, sums_copy;
  Tensor& max = max_.is_host() ? max_ : (max_copy = to_host(max_));
  Tensor& sums = sums_.is_host() ? sums_ : (sums_copy = to_host(sums_));
  normalizer_mine_.resize(3 * b);
  std::copy_n(max.data(), b, normalizer_mine_.begin());
  std::copy_n(sums.data(), 2 * b, normalizer_mine_.begin() + static_cast<std::ptrdiff_t>(b));
  const auto ranks = static_cast<size_t>(group.size());
  normalizer_all_.resize(3 * b * ranks);
  group.all_gather(normalizer_mine_, normalizer_all_).wait();
  float* m_out = max.data();
  float* s_out = sums.data();
  parallel_rows(b, [&](size_t i) {
    float m = -std::numeric_limits<float>::infinity();
    for (size_t r = 0; r < ranks; ++r) m = std::max(m, normalizer_all_[r * 3 * b + i]);
    double sum = 0.0, labels = 0.0;
    for (size_t r = 0; r < ranks; ++r) {
      const float* part = normalizer_all_.data() + r * 3 * b;
      // A rank without logits for the point has max -inf and sum 0: it adds nothing.
      if (part[i] != -std::numeric_limits<float>::infinity())
        sum += static_cast<double>(part[b + i]) * std::exp(static_cast<double>(part[i]) - static_cast<double>(m));
      labels += static_cast<double>(part[2 * b + i]);
    }
    m_out[i] = m;
    s_out[i] = static_cast<float>(sum);
    s_out[b + i] = static_cast<float>(labels);
  }, 256);
  if (!max_.is_host()) copy_from_host(max_, max.data());
  if (!sums_.is_host()) copy_from_host(sums_, sums.data());
}

double SoftmaxOutput::exact_forward_backward(const Tensor& in, const SparseBatch& batch, Tensor* grad_in,
                                             float grad_scale) {
  const size_t b = in.rows(), n = end_ - begin_, d = options_.in;
  Backend& be = backend();
  keep_on(full_logits_, be);
  full_logits_.resize(b, n);
  be.matmul(in, false, weight_.value, true, full_logits_);
  be.bias_act_forward(full_logits_, bias_.value, Act::none);
  positions_.resize(b);
  parallel_rows(b, [&](size_t i) {
    positions_[i].clear();
    for (const uint32_t l : batch.labels_of(i))
      if (l >= begin_ && l < end_) positions_[i].push_back(l - static_cast<uint32_t>(begin_));
  });
  // The logits' CSR offsets (i * labels) go to the backend when the batch's shape changes.
  keep_on(row_offsets_, be);
  if (row_offsets_.size() != b + 1 || row_offsets_width_ != n) {
    std::vector<uint64_t> offsets(b + 1);
    for (size_t i = 0; i <= b; ++i) offsets[i] = i * n;
    assign_values(row_offsets_, std::span<const uint64_t>(offsets));
    row_offsets_width_ = n;
  }
  const double loss = distributed_xent(batch, full_logits_, row_offsets_, grad_scale);
  // Work: the logits' product (weights and input read once, logits written), the bias pass (read,
  // write) and the cross-entropy's kernels over the logits (max: read; sums: read; loss and
  // gradient: read, write).
  const auto bd = static_cast<double>(b), nd = static_cast<double>(n), dd = static_cast<double>(d);
  profile::count(profile::Phase::output_forward, 2.0 * bd * nd * dd + 6.0 * bd * nd,
                 4.0 * (nd * dd + bd * dd + 7.0 * bd * nd + nd));
  if (grad_in == nullptr) return loss;
  const profile::Scope backward_phase(profile::Phase::output_backward);
  // Two products (input gradient, weight gradient: the weights read and their gradient written),
  // each reading dLoss/dz, and the bias gradient's pass.
  profile::count(profile::Phase::output_backward, 4.0 * bd * nd * dd + bd * nd,
                 4.0 * (2.0 * nd * dd + 3.0 * bd * nd + 2.0 * bd * dd + nd));
  labels_scored_ += b * n;
  // full_logits_ now holds dLoss/dz (scaled).
  grad_in->resize(b, d);
  be.matmul(full_logits_, false, weight_.value, false, *grad_in);
  weight_.grad.rows.resize(n);
  std::iota(weight_.grad.rows.begin(), weight_.grad.rows.end(), 0u);
  keep_on(weight_.grad.values, be);
  weight_.grad.values.resize(n, d);
  be.matmul(full_logits_, true, in, false, weight_.grad.values);
  bias_.grad.rows = weight_.grad.rows;
  keep_on(bias_.grad.values, be);
  bias_.grad.values.resize(n, 1);
  be.bias_act_backward(full_logits_, full_logits_, Act::none, bias_.grad.values);
  return loss;
}

void SoftmaxOutput::check_active_ids(const ActiveSets& sets) const {
  // The ops read the rows the ids name without checking them where they run (a device). One pass
  // for the largest id (vectorized), so that the check costs the CPU path next to nothing.
  const size_t n = end_ - begin_;
  if (sets.ids.empty()) return;
  const uint32_t most = *std::max_element(sets.ids.begin(), sets.ids.end());
  FRUGAL_CHECK(most < n, fmt::format("SoftmaxOutput: active label {} is outside the slice's {} labels", most, n));
}

void SoftmaxOutput::list_label_positions(const SparseBatch& batch, bool sampled) {
  const size_t b = batch.size();
  positions_.resize(b);
  if (sampled) {
    // The sampler's sets start with each point's distinct labels in the batch's order: a label's
    // position is its place among them (a repeated label points at its first).
    const std::span<const uint64_t> first = sampler_->label_offsets();
    parallel_rows(b, [&](size_t i) {
      positions_[i].clear();
      std::vector<uint32_t> seen;
      for (const uint32_t l : batch.labels_of(i)) {
        if (l < begin_ || l >= end_) continue;
        const auto at = static_cast<size_t>(std::find(seen.begin(), seen.end(), l) - seen.begin());
        if (at == seen.size()) seen.push_back(l);
        positions_[i].push_back(static_cast<uint32_t>(at));
      }
      FRUGAL_CHECK(seen.size() == first[i + 1] - first[i],
                   fmt::format("SoftmaxOutput: point {} has {} labels here, its set starts with {}", i, seen.size(),
                               first[i + 1] - first[i]));
    });
    return;
  }
  // Positions of the point's own labels inside its active set (an override may place them anywhere).
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
}

double SoftmaxOutput::sampled_forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in,
                                               float grad_scale) {
  const size_t b = in.rows();
  Backend& be = backend();
  // The sampler makes the sets where the layer computes (its ops: nothing crosses but the labels);
  // an override (tests) or an empty slice's are made here on the host and enter the step once.
  const bool sampled = override_ == nullptr && sampler_ != nullptr;
  if (sampled) {
    sampler_->set_backend(&be);
    sampler_->maybe_rebuild(weight_.value, step);
    sampler_->sample(in, &batch, static_cast<uint32_t>(begin_), step, active_tensors_);
  } else {
    if (override_ != nullptr) {
      FRUGAL_CHECK(override_->num_samples() == b, "SoftmaxOutput: override active sets do not match the batch");
      active_ = *override_;
    } else {  // an empty slice: no labels, no logits
      active_.ids.clear();
      active_.logit_offsets.clear();
      active_.offsets.assign(b + 1, 0);
    }
    check_active_ids(active_);
    active_tensors_.assign(active_, be);
  }
  // Random negatives stand for the labels outside the set: their logQ correction (the sets'
  // logit_offsets, added by active_logits) enters the softmax (and so the gradient's
  // probabilities); dLoss/dz = dLoss/dz' as the offset is constant.
  keep_on(logits_, be);
  be.active_logits(in, active_tensors_, weight_.value, bias_.value, logits_);
  // The point's own labels: the sampler put them first, each once. Otherwise (an override, or a
  // point listing a label twice, which counts twice in its loss) their positions are listed.
  const bool labels_first = sampled && sampler_->labels_were_distinct();
  if (!labels_first) list_label_positions(batch, sampled);
  const double loss = distributed_xent(batch, logits_, active_tensors_.offsets, grad_scale,
                                       labels_first ? &sampler_->label_offsets_tensor() : nullptr);
  // Work per active label of a point: a dot product with the hidden vector; its id, logit offset
  // and logit, and the cross-entropy's kernels over the logits (max, sums: read; loss and
  // gradient: read, write). The distinct weight rows read are counted below, once they are listed.
  const auto a = static_cast<double>(active_tensors_.total()), d = static_cast<double>(options_.in);
  profile::count(profile::Phase::output_forward, 2.0 * a * d + 6.0 * a, 4.0 * 7.0 * a);
  if (grad_in == nullptr) return loss;
  const profile::Scope backward_phase(profile::Phase::output_backward);
  be.active_backward_input(active_tensors_, logits_, weight_.value, *grad_in);
  keep_on(weight_.grad.values, be);
  keep_on(bias_.grad.values, be);
  // A device keeps the row list it finds. The host lists the same rows from sets it made; the
  // sampler's never reached the host, so the list stays on the device alone (RowGrad::rows_on_device:
  // the optimizer's lazy update reads it there; only the count comes down).
  weight_.grad.rows_on_device = !be.device().is_host() && sampled;
  if (!be.device().is_host() && !sampled) {
    if (distinct_.num_rows() < end_ - begin_) distinct_ = DistinctRows(end_ - begin_);
    distinct_.list(active_.ids, weight_.grad.rows);
  }
  be.row_accumulate(row_workspace(be, workspace_, end_ - begin_), active_tensors_, logits_, in, weight_.grad,
                    &bias_.grad);
  // The logits' reads of the distinct active rows (and their biases); then two multiply-adds per
  // active label and column: dLoss/dh (the rows read again, ids and gradients read, dLoss/dh
  // written) and the rows' gradients (ids, gradients and hidden vectors read, each distinct row's
  // gradient and bias gradient written once).
  // (A weight element is 4 bytes, or 2 in bf16; gradients are f32.)
  const auto rows = static_cast<double>(weight_.grad.num_rows()), points = static_cast<double>(b);
  const auto wb = static_cast<double>(dtype_bytes(weight_.value.dtype()));
  profile::count(profile::Phase::output_forward, 0.0, wb * rows * d + 4.0 * rows, wb * rows * d + 4.0 * rows);
  profile::count(profile::Phase::output_backward, 4.0 * a * d,
                 wb * rows * d + 4.0 * (rows * d + rows + 4.0 * a + 2.0 * points * d), wb * rows * d);
  labels_scored_ += active_tensors_.total();
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
    std::sort(cand.begin(), cand.end(), top_k_before);
    for (size_t j = 0; j < k; ++j) {
      labels[i * k + j] = cand[j].second;
      scores[i * k + j] = cand[j].first;
    }
  }
}

void SoftmaxOutput::set_inference(const InferenceOptions& options) {
  inference_ = options;
  const size_t local = end_ - begin_;
  if (options.mode != Inference::lsh || sampler_ != nullptr || inference_sampler_ != nullptr || local == 0) return;
  // Trained with the exact softmax: hash its label rows with the LSH defaults for this slice.
  lsh::LshOptions o;
  o.negatives = 0;
  o.tables = lsh::kInferenceTables;
  o.family = lsh::auto_family(lsh::Dwta{}, o.tables, local);
  inference_sampler_ = std::make_unique<lsh::LshSampler>(
      o, options_.in, local, Rng(options_.seed).split(0x1f5).split(options_.placement.rank()).next_u64());
}

void SoftmaxOutput::visit_top_k(const Tensor& in, size_t k, const TopLabelsVisitor& visit) {
  const size_t n = end_ - begin_;
  const bool lsh = inference_.mode == Inference::lsh;
  // A group merges its ranks' candidates on the host; bf16 weights and many host labels are scored
  // a block of labels at a time there (blocked_top_k).
  if (options_.placement.is_sliced() || n == 0 || (!lsh && scores_in_blocks())) return OutputLayer::visit_top_k(in, k, visit);
  if (!lsh) labels_scored_ += in.rows() * n;
  rank_slice(in, std::min(k, n), [&](size_t first_row, const Tensor& labels, const Tensor&) { visit(first_row, labels); });
}

void SoftmaxOutput::rank_slice(const Tensor& in, size_t k, const RankedBlock& visit) {
  Backend& be = backend();
  if (top_labels_.dtype() != Dtype::u32) top_labels_ = Tensor(0, 0, Dtype::u32);
  keep_on(top_labels_, be);
  keep_on(top_scores_, be);
  if (inference_.mode == Inference::lsh) {
    lsh::LshSampler& sampler = sampler_ != nullptr ? *sampler_ : *inference_sampler_;
    sampler.set_backend(&be);
    sampler.ensure_built(weight_.value);
    // A slice keeps its share of the candidates (at least 1).
    const size_t cap = inference_.candidates == 0 ? 0
        : std::max<size_t>(1, (inference_.candidates * (end_ - begin_) + options_.out - 1) / options_.out);
    sampler.sample(in, nullptr, static_cast<uint32_t>(begin_), 0, candidate_tensors_, cap);
    keep_on(logits_, be);
    be.active_logits(in, candidate_tensors_, weight_.value, bias_.value, logits_);
    labels_scored_ += candidate_tensors_.total();
    // Fewer candidates than k: the rest are labels the tables did not return, ranked last (-inf),
    // lowest ids first, so every point still gets k distinct labels.
    be.top_k({.rows = in.rows(), .scores = &logits_, .offsets = &candidate_tensors_.offsets,
              .ids = &candidate_tensors_.ids, .label_base = static_cast<uint32_t>(begin_)},
             k, top_labels_, top_scores_);
    return visit(0, top_labels_, top_scores_);
  }
  // Score in chunks of rows so that a million labels never need more than ~64 MB of logits.
  const size_t b = in.rows(), n = end_ - begin_;
  const size_t chunk = std::max<size_t>(1, (size_t{16} << 20) / n);
  keep_on(full_logits_, be);
  for (size_t r0 = 0; r0 < b; r0 += chunk) {
    const size_t rows = std::min(chunk, b - r0);
    full_logits_.resize(rows, n);
    be.matmul(in.rows_view(r0, rows), false, weight_.value, true, full_logits_);
    // The bias is added as the candidates are ranked (the same float sums, no pass of their own);
    // only the k best of each row leave the step.
    be.top_k({.rows = rows, .scores = &full_logits_, .width = n, .label_base = static_cast<uint32_t>(begin_),
              .bias = &bias_.value},
             k, top_labels_, top_scores_);
    visit(r0, top_labels_, top_scores_);
  }
}

void SoftmaxOutput::local_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) {
  const size_t b = in.rows(), n = end_ - begin_;
  if (n == 0) {  // an empty slice has no candidates
    labels.clear();
    scores.clear();
    return;
  }
  const bool lsh = inference_.mode == Inference::lsh;
  k = std::min(k, n);
  if (!lsh) labels_scored_ += b * n;
  labels.resize(b * k);
  scores.resize(b * k);
  // bf16 weights, and host f32 ones over more labels than a block: a block of labels at a time for
  // every point (rank_slice's chunks of points over every label read the whole matrix once per 16M
  // logits: at 3M labels once per 5 points, 2.7x the time of the blocks, bench/REPORT.md).
  if (!lsh && scores_in_blocks()) return blocked_top_k(in, k, labels, scores);
  rank_slice(in, k, [&](size_t first_row, const Tensor& top_labels, const Tensor& top_scores) {
    copy_to_host(top_labels, labels.data() + first_row * k);
    copy_to_host(top_scores, scores.data() + first_row * k);
  });
}

bool SoftmaxOutput::scores_in_blocks() const {
  return weight_.value.dtype() != Dtype::f32 || (weight_.value.is_host() && end_ - begin_ > kScoreBlockLabels);
}

void SoftmaxOutput::blocked_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels,
                                  std::vector<float>& scores) {
  // A block of labels at a time is scored for every point (bf16 weights widened to f32 first), each
  // block keeping its k best; a last top_k over the blocks' candidates (scores with the bias
  // already added) gives the same labels and scores as scoring all labels at once.
  const size_t b = in.rows(), n = end_ - begin_, d = options_.in;
  const size_t block = std::max<size_t>(k, std::min<size_t>(n, kScoreBlockLabels));
  const bool widen = weight_.value.dtype() != Dtype::f32 || !weight_.value.is_host();
  // Every block but the last has >= k labels: the candidates per point, in block order.
  const size_t last = n - (n - 1) / block * block, width = (n - last) / block * k + std::min(k, last);
  Backend& be = backend();
  std::vector<float> cand_scores(b * width), block_scores;
  std::vector<uint32_t> cand_labels(b * width), block_labels;
  Tensor wide, block_copy;
  keep_on(full_logits_, be);
  for (size_t l0 = 0, filled = 0; l0 < n; l0 += block) {
    const size_t len = std::min(block, n - l0), kb = std::min(k, len);
    if (widen) {
      wide.resize(len, d);
      // The block's rows from the host's view of the weights (a copy of the block where they live on
      // a device), widened.
      const bool host = weight_.value.is_host();
      const Tensor& rows = host ? weight_.value : host_view(weight_.value.rows_view(l0, len), block_copy);
      const size_t first = host ? l0 : 0;
      parallel_rows(len, [&](size_t j) { rows.read_row(first + j, wide.row(j)); }, 256);
    }
    full_logits_.resize(b, len);
    be.matmul(in, false, widen ? wide : weight_.value.rows_view(l0, len), true, full_logits_);
    block_labels.resize(b * kb);
    block_scores.resize(b * kb);
    Tensor top_labels = host_tensor(block_labels.data(), b, kb, Dtype::u32);
    Tensor top_scores = host_tensor(block_scores.data(), b, kb, Dtype::f32);
    be.top_k({.rows = b, .scores = &full_logits_, .width = len, .label_base = static_cast<uint32_t>(begin_ + l0),
              .bias = &bias_.value, .bias_offset = l0},
             kb, top_labels, top_scores);
    for (size_t i = 0; i < b; ++i) {
      std::copy_n(block_labels.data() + i * kb, kb, cand_labels.data() + i * width + filled);
      std::copy_n(block_scores.data() + i * kb, kb, cand_scores.data() + i * width + filled);
    }
    filled += kb;
  }
  const Tensor cand_score_tensor = host_tensor(cand_scores.data(), b, width, Dtype::f32);
  const Tensor cand_label_tensor = host_tensor(cand_labels.data(), b, width, Dtype::u32);
  Tensor top_labels = host_tensor(labels.data(), b, k, Dtype::u32);
  Tensor top_scores = host_tensor(scores.data(), b, k, Dtype::f32);
  be.top_k({.rows = b, .scores = &cand_score_tensor, .width = width, .ids = &cand_label_tensor}, k, top_labels,
           top_scores);
}

size_t SoftmaxOutput::derived_state_bytes() const {
  return (sampler_ != nullptr ? sampler_->tables().bytes() : 0) +
         (inference_sampler_ != nullptr ? inference_sampler_->tables().bytes() : 0);
}

void SoftmaxOutput::after_update(uint64_t) {
  // The optimizer changed exactly the rows that had a gradient (after any data-parallel union). Rows
  // the host never had: a device's rebuild hashes every row anyway; a later host build would not
  // know which changed, so all count as changed.
  if (sampler_ == nullptr) return;
  if (weight_.grad.rows_on_device)
    sampler_->mark_all_changed();
  else
    sampler_->mark_changed(weight_.grad.rows);
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
  Tensor in_copy;
  const Tensor& hidden = host_view(in, in_copy);  // summed on the host (a copy of a device's)
  for (size_t i = 0; i < batch.size(); ++i)
    for (const uint32_t l : batch.labels_of(i)) {
      if (l < begin_ || l >= end_) continue;
      ++centroid_points_[l - begin_];
      float* row = centroid_sum_.row(l - begin_);
      const float* h = hidden.row(i);
      for (size_t c = 0; c < options_.in; ++c) row[c] += h[c];
    }
}

void SoftmaxOutput::finish_centroids(float scale, std::span<const float> mean) {
  FRUGAL_CHECK(scale > 0 && std::isfinite(scale), fmt::format("SoftmaxOutput: centroid scale must be > 0, got {}", scale));
  FRUGAL_CHECK(mean.size() == options_.in, fmt::format("SoftmaxOutput: mean hidden vector has {} entries, expected {}",
                                                       mean.size(), options_.in));
  if (centroid_sum_.rows() != end_ - begin_) return;  // no point reached this slice
  // The rows are formed on the host: weights on a device come down once and go back once.
  Tensor weight = to_host(weight_.value), bias = to_host(bias_.value);
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
    // The row is formed in c (f32), stored in the weight's precision, and the bias computed from
    // the stored values.
    for (size_t k = 0; k < options_.in; ++k) c[k] *= f;
    weight.write_row(j, c);
    weight.read_row(j, c);
    double shift = 0.0;
    for (size_t k = 0; k < options_.in; ++k) shift += static_cast<double>(c[k]) * mean[k];
    bias.data()[j] = static_cast<float>(-shift);
  });
  weight_.value.assign(weight);
  bias_.value.assign(bias);
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
