// The top-k by magnitude that both halves of DCT select: DCT-MP's activations per sample
// (boundary_exchange.cpp) and DCT-DP's per-row entries (thresholder.cpp). Ties go to the lower
// index, so every rank that sees the same values picks the same positions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

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

}  // namespace frugal::comm
