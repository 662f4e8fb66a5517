// The row-wise optimizers' per-row statistic, written once for the host and the device
// (FRUGAL_HOST_DEVICE) so every backend gives the same bits: the mean of a gradient row's squares,
// summed in double in 8 interleaved partial sums (column c into sum c % 8, in column order; that
// much independence lets a CPU vectorize the loop) added pairwise, divided by the row's width, then
// rounded to f32.
#pragma once

#include <cstddef>

#include "core/host_device.h"

namespace frugal {

inline constexpr size_t kRowwiseLanes = 8;

FRUGAL_HOST_DEVICE inline float rowwise_mean_square(const float* g, size_t n) {
  double s[kRowwiseLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t c = 0;
  for (; c + kRowwiseLanes <= n; c += kRowwiseLanes)
    for (size_t l = 0; l < kRowwiseLanes; ++l) s[l] += static_cast<double>(g[c + l]) * g[c + l];
  for (size_t l = 0; c < n; ++c, ++l) s[l] += static_cast<double>(g[c]) * g[c];
  const double total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  return n == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(n));
}

}  // namespace frugal
