#include "kernels/softmax_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/parallel_rows.h"

namespace frugal::kernels {
namespace {

// The k best of n (score, label) candidates produced by `entry(j)`, best first, through a k-entry
// min-heap: one pass, no scratch of the candidates' size.
// One candidate offered to a heap of at most k: kept while there is room, else in place of the
// least when it ranks before it.
void offer_to_heap(const std::pair<float, uint32_t>& e, size_t k, std::vector<std::pair<float, uint32_t>>& heap) {
  if (heap.size() < k) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), top_k_before);
  } else if (top_k_before(e, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), top_k_before);
    heap.back() = e;
    std::push_heap(heap.begin(), heap.end(), top_k_before);
  }
}

template <class Entry>
void heap_top_k(size_t n, size_t k, Entry entry, std::vector<std::pair<float, uint32_t>>& heap) {
  heap.clear();
  heap.reserve(k + 1);
  for (size_t j = 0; j < n; ++j) offer_to_heap(entry(j), k, heap);
  std::sort_heap(heap.begin(), heap.end(), top_k_before);
}

// The first position from j on where a block of 16 dense candidates (score s[i], plus bias[i] when
// given) has one above `threshold`, or where fewer than 16 remain; j itself on a CPU without AVX-512
// (every block is then offered to the heap).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) size_t next_block_above_avx512(const float* s, const float* bias, size_t j,
                                                                  size_t n, float threshold) {
  const __m512 t = _mm512_set1_ps(threshold);
  for (; j + 16 <= n; j += 16) {
    __m512 v = _mm512_loadu_ps(s + j);
    if (bias != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + j));  // the scalar sum's bits
    if (_mm512_cmp_ps_mask(v, t, _CMP_GT_OQ) != 0) return j;
  }
  return j;
}
#endif

size_t next_block_above(const float* s, const float* bias, size_t j, size_t n, float threshold) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return next_block_above_avx512(s, bias, j, n, threshold);
#endif
  (void)s, (void)bias, (void)n, (void)threshold;
  return j;
}

// heap_top_k over a dense row (candidate j is label j, its score s[j] + bias[j]): once the heap holds
// k, a candidate enters only with a score above the heap's least (a later label loses every tie, and
// NaN never enters), so a block of 16 with none above it is skipped in one vector comparison; the
// other blocks go through the heap as before: the same labels and scores, a fraction of the branches
// (exact scoring over a million labels spent more time here than in its matrix product).
void dense_top_k(const float* s, const float* bias, size_t n, size_t k, std::vector<std::pair<float, uint32_t>>& heap) {
  heap.clear();
  heap.reserve(k + 1);
  const auto offer = [&](size_t j) {
    offer_to_heap({bias != nullptr ? s[j] + bias[j] : s[j], static_cast<uint32_t>(j)}, k, heap);
  };
  size_t j = 0;
  for (; j < n && heap.size() < k; ++j) offer(j);
  while (j < n) {
    j = next_block_above(s, bias, j, n, heap.front().first);
    for (const size_t end = std::min(n, j + 16); j < end; ++j) offer(j);
  }
  std::sort_heap(heap.begin(), heap.end(), top_k_before);
}

}  // namespace

void xent_max(std::span<const float> z, const XentBatch& batch, std::span<float> max) {
  batch.validate(z.size());
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b, "xent_max: one maximum per sample");
  parallel_rows(b, [&](size_t i) {
    float m = -INFINITY;
    for (uint64_t e = batch.offsets[i]; e < batch.offsets[i + 1]; ++e) m = std::max(m, z[e]);
    max[i] = m;
  });
}

void xent_sums(std::span<const float> z, const XentBatch& batch, std::span<const float> max, std::span<float> sums) {
  batch.validate(z.size());
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b && sums.size() == 2 * b, "xent_sums: one maximum and two sums per sample");
  parallel_rows(b, [&](size_t i) {
    const float* zi = z.data() + batch.offsets[i];
    const size_t nj = batch.offsets[i + 1] - batch.offsets[i];
    double s = 0.0;
    for (size_t j = 0; j < nj; ++j) s += std::exp(static_cast<double>(zi[j] - max[i]));
    double y = 0.0;
    for (uint64_t p = batch.pos_offsets[i]; p < batch.pos_offsets[i + 1]; ++p) y += zi[batch.position(i, p)];
    sums[i] = static_cast<float>(s);
    sums[b + i] = static_cast<float>(y);
  });
}

void xent_loss_grad(std::span<float> z, const XentBatch& batch, std::span<const float> max,
                    std::span<const float> sums, std::span<double> losses) {
  batch.validate(z.size());
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b && sums.size() == 2 * b && losses.size() == b,
               "xent_loss_grad: one maximum, two sums and one loss per sample");
  parallel_rows(b, [&](size_t i) {
    float* zi = z.data() + batch.offsets[i];
    const size_t nj = batch.offsets[i + 1] - batch.offsets[i];
    const uint64_t labels = batch.label_offsets[i + 1] - batch.label_offsets[i];
    if (labels == 0) {  // nothing to learn from a point without labels
      std::fill(zi, zi + nj, 0.0f);
      losses[i] = 0.0;
      return;
    }
    const float w = 1.0f / static_cast<float>(labels);
    losses[i] = std::log(static_cast<double>(sums[i])) + max[i] - w * static_cast<double>(sums[b + i]);
    const float inv = 1.0f / sums[i];
    for (size_t j = 0; j < nj; ++j) zi[j] = std::exp(zi[j] - max[i]) * inv;
    for (uint64_t p = batch.pos_offsets[i]; p < batch.pos_offsets[i + 1]; ++p) zi[batch.position(i, p)] -= w;
    // Scaled last, as a separate pass over the gradients would: the same bits.
    if (batch.grad_scale != 1.0f)
      for (size_t j = 0; j < nj; ++j) zi[j] *= batch.grad_scale;
  });
}

void top_k(const TopKRows& in, size_t k, std::span<uint32_t> labels, std::span<float> scores) {
  FRUGAL_CHECK(labels.size() == in.rows * k && scores.size() == in.rows * k,
               fmt::format("top_k: outputs hold {} and {} entries, expected {} x {}", labels.size(), scores.size(),
                           in.rows, k));
  if (k == 0) return;
  parallel_rows(in.rows, [&](size_t i) {
    const uint64_t start = in.offsets != nullptr ? in.offsets[i] : i * in.width;
    const size_t found = in.offsets != nullptr ? in.offsets[i + 1] - start : in.width;
    const float* s = in.scores + start;
    const uint32_t* ids = in.ids != nullptr ? in.ids + start : nullptr;
    const float* bias = in.bias;
    std::vector<std::pair<float, uint32_t>> heap;
    if (ids != nullptr && bias != nullptr)
      heap_top_k(found, k, [&](size_t j) { return std::pair{s[j] + bias[ids[j]], ids[j]}; }, heap);
    else if (ids != nullptr)
      heap_top_k(found, k, [&](size_t j) { return std::pair{s[j], ids[j]}; }, heap);
    else
      dense_top_k(s, bias, found, k, heap);
    // Fewer candidates than k: the rest are labels not among them, ranked last (-inf), lowest
    // ids first, so every row still gets k distinct labels.
    for (uint32_t j = 0; heap.size() < k; ++j) {
      const bool listed = ids != nullptr ? std::find(ids, ids + found, j) != ids + found : j < found;
      if (!listed) heap.emplace_back(-INFINITY, j);
    }
    for (size_t j = 0; j < k; ++j) {
      labels[i * k + j] = heap[j].second + in.label_base;
      scores[i * k + j] = heap[j].first;
    }
  });
}

}  // namespace frugal::kernels
