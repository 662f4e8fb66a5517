// The top-k by magnitude that both halves of DCT select: DCT-MP's activations per sample
// (boundary_exchange.cpp) and DCT-DP's per-row entries (thresholder.cpp). Ties go to the lower
// index, so every rank that sees the same values picks the same positions.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "comm/dct/magnitude_scan.h"

namespace frugal::comm {

// Orders positions of `v` by magnitude, largest first; the lower position wins a tie.
struct LargerMagnitude {
  const float* v;
  bool operator()(uint32_t a, uint32_t b) const {
    const float fa = std::abs(v[a]), fb = std::abs(v[b]);
    return fa > fb || (fa == fb && a < b);
  }
};

// order := the positions 0..n-1 of `v`, the k (<= n) of largest magnitude first (in no particular
// order among themselves).
inline void partition_largest(const float* v, size_t n, size_t k, std::vector<uint32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  if (k < n) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(),
                              LargerMagnitude{v});
}

// The k-th largest of the magnitudes |v[0..n)| (1 <= k < n), and how many of the k largest are
// strictly above it. A few (k <= 32, DCT-DP's per-row keeps): one pass that keeps them sorted in a
// small buffer (a row of random values inserts ~k ln(n / k) times), skipping to the next entry
// above the smallest kept (next_magnitude_above); more: a float nth_element.
inline std::pair<float, size_t> kth_largest_magnitude(const float* v, size_t n, size_t k) {
  const auto count_above = [k](const float* top) {
    const float kth = top[k - 1];
    size_t above = 0;
    for (size_t j = 0; j < k; ++j) above += top[j] > kth ? 1 : 0;  // nth_element leaves the k largest first
    return std::pair<float, size_t>{kth, above};
  };
  if (k <= 32) {
    // On the stack, with the smallest kept in a register: the scan compares against it without
    // reading back what the last insertion stored.
    std::array<float, 32> top;
    std::fill_n(top.begin(), k, -1.0f);  // below every magnitude (a NaN never enters: it is not > anything)
    float bound = -1.0f;
    for (size_t i = 0; (i = next_magnitude_above(v, i, n, bound)) < n; ++i) {
      const float m = std::abs(v[i]);
      size_t j = k - 1;
      for (; j > 0 && top[j - 1] < m; --j) top[j] = top[j - 1];
      top[j] = m;
      bound = top[k - 1];
    }
    return count_above(top.data());
  }
  thread_local std::vector<float> top;
  top.resize(n);
  for (size_t i = 0; i < n; ++i) top[i] = std::abs(v[i]);
  std::nth_element(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k - 1), top.end(), std::greater<float>());
  return count_above(top.data());
}

// out := the positions of the k (<= n) largest magnitudes of `v`, ties to the lower position (the
// set partition_largest puts first), in ascending order. Selects over the magnitudes themselves
// (kth_largest_magnitude, then one pass in position order) rather than over positions through an
// indirect comparator: what each DCT row and sample needs, several times faster.
inline void largest_ascending(const float* v, size_t n, size_t k, std::vector<uint32_t>& out) {
  out.clear();
  if (k >= n) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0u);
    return;
  }
  if (k == 0) return;
  const auto [kth, above] = kth_largest_magnitude(v, n, k);
  size_t ties = k - above;  // taken among those equal to the k-th, lowest positions first
  for (size_t i = 0; (i = next_magnitude_above(v, i, n, kth, /*or_equal=*/true)) < n; ++i) {
    const float m = std::abs(v[i]);
    if (m > kth) {
      out.push_back(static_cast<uint32_t>(i));
    } else if (m == kth && ties > 0) {
      out.push_back(static_cast<uint32_t>(i));
      --ties;
    }
    if (out.size() == k) break;  // the rest holds nothing above the k-th and no tie left to take
  }
}

}  // namespace frugal::comm
