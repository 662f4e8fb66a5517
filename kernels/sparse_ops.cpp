#include "kernels/sparse_ops.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "kernels/bf16_dot.h"
#include "kernels/vector_ops.h"

namespace frugal::kernels {
namespace {
template <class F>
void for_samples(size_t n, F&& body) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) body(i);
  });
}

// Row access for a weight matrix of either precision: the f32 kernels on f32 rows, their bf16
// counterparts (the same bits on the widened values) on bf16 rows, or the bf16 dot-product kernels
// (kernels/bf16_dot.h) where the mode says so: decided once per op, so every thread takes one path.
struct WeightRows {
  const Tensor& w;
  bool bf16 = w.dtype() == Dtype::bf16;
  bool bf16_dot = bf16 && bf16_dot_active();
  size_t row_bytes = w.cols() * dtype_bytes(w.dtype());
  const void* ptr(size_t r) const {
    return bf16 ? static_cast<const void*>(w.bf16_row(r)) : static_cast<const void*>(w.row(r));
  }
  void prefetch(size_t r) const { prefetch_bytes(ptr(r), row_bytes); }
  void axpy_into(float alpha, size_t r, float* y) const {
    if (bf16) {
      axpy_bf16(alpha, w.bf16_row(r), y, w.cols());
    } else {
      axpy(alpha, w.row(r), y, w.cols());
    }
  }
  float dot_with(const float* a, size_t r) const {
    return bf16 ? dot_bf16(a, w.bf16_row(r), w.cols()) : dot(a, w.row(r), w.cols());
  }
};
}  // namespace

void sparse_input_forward(const SparseView& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& out) {
  const size_t h = w.cols();
  FRUGAL_CHECK(bias.size() == h, fmt::format("bias has {} entries, the layer {}", bias.size(), h));
  out.resize(x.size(), h);
  const WeightRows rows{w};
  for_samples(x.size(), [&](size_t i) {
    float* o = out.row(i);
    std::memcpy(o, bias.data(), h * sizeof(float));
    const auto ids = x.features_of(i);
    const auto vals = x.values_of(i);
    if (rows.bf16_dot) {
      axpy_rows_bf16(vals.data(), w.bf16_data(), h, ids.data(), ids.size(), h, o);
    } else {
      for (size_t j = 0; j < ids.size(); ++j) {
        if (j + kPrefetchRows < ids.size()) rows.prefetch(ids[j + kPrefetchRows]);
        rows.axpy_into(vals[j], ids[j], o);
      }
    }
    if (relu)
      for (size_t c = 0; c < h; ++c) o[c] = o[c] > 0.0f ? o[c] : 0.0f;
  });
}

void active_logits(const Tensor& h, const ActiveView& active, const Tensor& w, const Tensor& bias,
                   std::span<float> logits) {
  FRUGAL_CHECK(logits.size() == active.total(),
               fmt::format("active_logits: {} logits for {} entries", logits.size(), active.total()));
  const WeightRows rows{w};
  for_samples(active.num_samples(), [&](size_t i) {
    const float* hi = h.row(i);
    const uint64_t begin = active.offsets[i], end = active.offsets[i + 1];
    if (rows.bf16_dot) {
      dot_rows_bf16(hi, w.bf16_data(), w.cols(), active.ids.data() + begin, end - begin, w.cols(),
                    logits.data() + begin);
      for (uint64_t e = begin; e < end; ++e) logits[e] += bias.data()[active.ids[e]];
    } else if (rows.bf16) {
      for (uint64_t e = begin; e < end; ++e) {
        if (e + kPrefetchRows < end) rows.prefetch(active.ids[e + kPrefetchRows]);
        const uint32_t r = active.ids[e];
        logits[e] = rows.dot_with(hi, r) + bias.data()[r];
      }
    } else {
      // The products, then the biases: the same bits as dot + bias (one addition of two floats).
      dot_rows(hi, w.data(), w.cols(), active.ids.data() + begin, end - begin, w.cols(), logits.data() + begin);
      for (uint64_t e = begin; e < end; ++e) logits[e] += bias.data()[active.ids[e]];
    }
    // The sampling correction of random negatives, added to the stored logit (as a separate
    // rounding step: the bits are those of adding it afterwards).
    if (!active.logit_offsets.empty())
      for (uint64_t e = active.offsets[i]; e < active.offsets[i + 1]; ++e) logits[e] += active.logit_offsets[e];
  });
}

void active_backward_input(const ActiveView& active, std::span<const float> dlogits,
                           const Tensor& w, Tensor& grad_h) {
  const size_t d = w.cols();
  grad_h.resize(active.num_samples(), d);
  const WeightRows rows{w};
  for_samples(active.num_samples(), [&](size_t i) {
    float* g = grad_h.row(i);
    std::memset(g, 0, d * sizeof(float));
    const uint64_t begin = active.offsets[i], end = active.offsets[i + 1];
    if (!rows.bf16) {
      axpy_rows(dlogits.data() + begin, w.data(), d, active.ids.data() + begin, end - begin, d, /*skip_zeros=*/true, g);
      return;
    }
    if (rows.bf16_dot) {
      axpy_rows_bf16(dlogits.data() + begin, w.bf16_data(), d, active.ids.data() + begin, end - begin, d, g);
      return;
    }
    for (uint64_t e = begin; e < end; ++e) {
      if (e + kPrefetchRows < end) rows.prefetch(active.ids[e + kPrefetchRows]);
      if (dlogits[e] != 0.0f) rows.axpy_into(dlogits[e], active.ids[e], g);
    }
  });
}

void RowAccumulator::accumulate(std::span<const uint64_t> offsets, const uint32_t* ids,
                                const float* coefs, const Tensor& vecs, RowGrad& grad,
                                RowGrad* bias_grad) {
  const size_t samples = offsets.size() - 1;
  const uint64_t entries = offsets.back();
  // 1. The distinct rows, sorted: where they are many (an output layer's active rows are most of its
  // rows) by one pass over every row's mark, which costs a tenth of sorting them; where they are few
  // (an input layer's features) by sorting the list.
  grad.rows.clear();
  for (uint64_t e = 0; e < entries; ++e) {
    const uint32_t r = ids[e];
    FRUGAL_CHECK(r < slot_.size(), fmt::format("row id {} out of range (layer has {} rows)", r, slot_.size()));
    if (slot_[r] < 0) {
      slot_[r] = 0;
      grad.rows.push_back(r);
    }
  }
  if (grad.rows.size() * 16 > slot_.size()) {
    size_t k = 0;
    for (size_t r = 0; r < slot_.size(); ++r)
      if (slot_[r] == 0) grad.rows[k++] = static_cast<uint32_t>(r);
  } else {
    std::sort(grad.rows.begin(), grad.rows.end());
  }
  const size_t nrows = grad.rows.size();
  for (size_t j = 0; j < nrows; ++j) slot_[grad.rows[j]] = static_cast<int32_t>(j);
  // 2. Counting sort of the entries by row, keeping sample order within a row.
  row_start_.assign(nrows + 1, 0);
  for (uint64_t e = 0; e < entries; ++e) ++row_start_[slot_[ids[e]] + 1];
  for (size_t j = 0; j < nrows; ++j) row_start_[j + 1] += row_start_[j];
  entry_sample_.resize(entries);
  entry_coef_.resize(entries);
  fill_.assign(row_start_.begin(), row_start_.end() - 1);
  auto& fill = fill_;
  for (size_t i = 0; i < samples; ++i)
    for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      const uint64_t pos = fill[slot_[ids[e]]]++;
      entry_sample_[pos] = static_cast<uint32_t>(i);
      entry_coef_[pos] = coefs[e];
    }
  // 3. One thread per row range: each gradient row is a sum in sample order.
  const size_t d = vecs.cols();
  grad.values.resize(nrows, d);
  if (bias_grad != nullptr) {
    bias_grad->rows = grad.rows;
    bias_grad->values.resize(nrows, 1);
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, nrows, 16), [&](const auto& range) {
    for (size_t j = range.begin(); j < range.end(); ++j) {
      float* g = grad.values.row(j);
      // Every listed row has at least one entry: the first initializes the row (no memset pass).
      const uint64_t first = row_start_[j], rest = row_start_[j + 1] - first - 1;
      scale_into(entry_coef_[first], vecs.row(entry_sample_[first]), g, d);
      axpy_rows(entry_coef_.data() + first + 1, vecs.data(), d, entry_sample_.data() + first + 1, rest, d,
                /*skip_zeros=*/false, g);
      float bias_sum = entry_coef_[first];
      for (uint64_t p = first + 1; p <= first + rest; ++p) bias_sum += entry_coef_[p];
      if (bias_grad != nullptr) bias_grad->values.data()[j] = bias_sum;
    }
  });
  for (const uint32_t r : grad.rows) slot_[r] = -1;
}

}  // namespace frugal::kernels
