#include "core/optim/deferred_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/rowwise.h"

namespace frugal::optim {

DeferredRows::DeferredRows(size_t rows, size_t cols, float threshold)
    : cols_(cols), threshold_(threshold), scale_(rows, 0.0f), slot_(rows, kNoSlot), residual_(0, cols) {}

uint32_t DeferredRows::acquire() {
  if (free_.empty()) {  // double the storage; the new slots are free
    const size_t old = residual_.rows(), grown = std::max<size_t>(64, 2 * old);
    Tensor bigger(grown, cols_);
    if (old > 0) std::memcpy(bigger.data(), residual_.data(), old * cols_ * sizeof(float));
    residual_ = std::move(bigger);
    peak_residual_bytes_ = std::max(peak_residual_bytes_, residual_.bytes());
    for (size_t s = grown; s-- > old;) free_.push_back(static_cast<uint32_t>(s));
  }
  const uint32_t s = free_.back();
  free_.pop_back();
  ++held_;
  return s;
}

void DeferredRows::filter(RowGrad& grad) {
  const size_t n = grad.rows.size();
  FRUGAL_CHECK(grad.values.is_host() && grad.values.dtype() == Dtype::f32 && grad.values.rows() == n &&
                   (n == 0 || grad.values.cols() == cols_),
               "--update-threshold: the gradient must be f32 rows in host memory");
  listed_ += n;
  keep_.resize(n);
  rms_.resize(n);
  // The decisions, row by row in parallel: no row's bits depend on another's.
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 256), [&](const auto& range) {
    for (size_t j = range.begin(); j < range.end(); ++j) {
      const uint32_t r = grad.rows[j];
      FRUGAL_CHECK(r < slot_.size(), fmt::format("--update-threshold: row {} of {}", r, slot_.size()));
      float* g = grad.values.row(j);
      rms_[j] = std::sqrt(rowwise_mean_square(g, cols_));
      float with_residual = rms_[j];
      if (slot_[r] != kNoSlot) {  // g' = g + residual and its squares in one pass
        const float* res = residual_.row(slot_[r]);
        double squares = 0;
        for (size_t c = 0; c < cols_; ++c) {
          g[c] += res[c];
          squares += static_cast<double>(g[c]) * g[c];
        }
        with_residual = static_cast<float>(std::sqrt(squares / static_cast<double>(cols_)));
      }
      keep_[j] = !(with_residual < threshold_ * scale_[r]);
      scale_[r] = scale_[r] == 0.0f ? rms_[j] : 0.9f * scale_[r] + 0.1f * rms_[j];
    }
  });
  // The residuals and the compaction, in row order.
  size_t out = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t r = grad.rows[j];
    if (!keep_[j]) {
      if (slot_[r] == kNoSlot) slot_[r] = acquire();
      std::memcpy(residual_.row(slot_[r]), grad.values.row(j), cols_ * sizeof(float));
      ++deferred_;
      continue;
    }
    if (slot_[r] != kNoSlot) {
      free_.push_back(slot_[r]);
      slot_[r] = kNoSlot;
      --held_;
    }
    if (out != j) {
      grad.rows[out] = r;
      std::memcpy(grad.values.row(out), grad.values.row(j), cols_ * sizeof(float));
    }
    ++out;
  }
  if (out == n) return;
  grad.rows.resize(out);
  grad.values.resize(out, cols_);  // shrinking keeps the allocation and the first rows' contents
}

void DeferredRows::take(RowGrad& grad) {
  FRUGAL_CHECK(grad.rows.empty(), "DeferredRows::take: the gradient is not empty");
  for (uint32_t r = 0; r < slot_.size(); ++r)
    if (slot_[r] != kNoSlot) grad.rows.push_back(r);
  grad.values = Tensor(grad.rows.size(), cols_);
  for (size_t j = 0; j < grad.rows.size(); ++j) {
    uint32_t& s = slot_[grad.rows[j]];
    std::memcpy(grad.values.row(j), residual_.row(s), cols_ * sizeof(float));
    s = kNoSlot;
  }
  grad.rows_on_device = false;
  free_.clear();
  held_ = 0;
  residual_ = Tensor(0, cols_);
  std::fill(scale_.begin(), scale_.end(), 0.0f);
}

size_t DeferredRows::bytes() const {
  return scale_.size() * sizeof(float) + slot_.size() * sizeof(uint32_t) + peak_residual_bytes_;
}

}  // namespace frugal::optim
