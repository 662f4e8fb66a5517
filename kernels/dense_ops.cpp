#include "kernels/dense_ops.h"

#include <algorithm>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/backend.h"
#include "core/check.h"

namespace frugal::kernels {
namespace {
// Rows per task: about 16k elements, so small layers do not pay for threads.
size_t row_grain(size_t cols) { return std::max<size_t>(1, (size_t{16} << 10) / std::max<size_t>(1, cols)); }
}  // namespace

void bias_act_forward(Tensor& y, const Tensor& bias, Act act) {
  const size_t n = y.cols();
  FRUGAL_CHECK(bias.size() == n, fmt::format("bias has {} entries, the output {} columns", bias.size(), n));
  const float* b = bias.data();
  const bool relu = act == Act::relu;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, y.rows(), row_grain(n)), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) {
      float* o = y.row(i);
      for (size_t c = 0; c < n; ++c) {
        const float v = o[c] + b[c];
        o[c] = (relu && v < 0.0f) ? 0.0f : v;
      }
    }
  });
}

void bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  const size_t rows = grad.rows(), n = grad.cols();
  FRUGAL_CHECK(bias_grad.size() == n, fmt::format("bias gradient has {} entries, the output {} columns",
                                                  bias_grad.size(), n));
  if (act == Act::relu) {
    FRUGAL_CHECK(y.rows() == rows && y.cols() == n, "bias_act_backward: output and gradient shapes differ");
    tbb::parallel_for(tbb::blocked_range<size_t>(0, rows, row_grain(n)), [&](const auto& r) {
      for (size_t i = r.begin(); i < r.end(); ++i) {
        float* g = grad.row(i);
        const float* o = y.row(i);
        for (size_t c = 0; c < n; ++c)
          if (o[c] <= 0.0f) g[c] = 0.0f;
      }
    });
  }
  // Column sums in row order, a block of columns per task.
  float* bg = bias_grad.data();
  constexpr size_t kBlock = 256;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, (n + kBlock - 1) / kBlock, 1), [&](const auto& r) {
    for (size_t blk = r.begin(); blk < r.end(); ++blk) {
      const size_t c0 = blk * kBlock, c1 = std::min(n, c0 + kBlock);
      std::fill(bg + c0, bg + c1, 0.0f);
      for (size_t i = 0; i < rows; ++i) {
        const float* g = grad.row(i);
        for (size_t c = c0; c < c1; ++c) bg[c] += g[c];
      }
    }
  });
}

double sum_squares(const Tensor& x) {
  const std::span<const float> v = x.span();
  const size_t chunks = (v.size() + kSquaresChunk - 1) / kSquaresChunk;
  std::vector<double> sums(chunks, 0.0);
  tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
    double s = 0.0;
    for (size_t i = c * kSquaresChunk, end = std::min(v.size(), i + kSquaresChunk); i < end; ++i)
      s += double{v[i]} * v[i];
    sums[c] = s;
  });
  double total = 0.0;
  for (const double s : sums) total += s;
  return total;
}

void scale(Tensor& x, float factor) {
  const std::span<float> v = x.span();
  tbb::parallel_for(tbb::blocked_range<size_t>(0, v.size(), 16384), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) v[i] *= factor;
  });
}

}  // namespace frugal::kernels
