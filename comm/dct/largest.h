// The top-k by magnitude that both halves of DCT select: DCT-MP's activations per sample
// (boundary_exchange.cpp) and DCT-DP's per-row entries (thresholder.cpp). Ties go to the lower
// index, so every rank that sees the same values picks the same positions.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
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

// The k-th largest magnitude by a binary search over its bits: a float's magnitude orders as its
// bit pattern (sign cleared) does, so the largest t with at least k patterns >= t is the k-th
// largest, built bit by bit from the top, each bit one counting pass (four lanes at once); it stops
// as soon as exactly k reach the bound (the k-th is then the least of them). ~0.5 us for a
// 128-wide row whatever k, where an nth_element or a sorted buffer of k costs 1-2 us once k passes
// ~10 (DCT-DP's per-row keeps under --compress auto reach 64 of 128). {kth, above} as below;
// nullopt when the row holds a NaN (the callers' slower paths leave NaNs out).
inline std::optional<std::pair<float, size_t>> kth_largest_magnitude_bits(const float* v, size_t n, size_t k) {
  thread_local std::vector<uint32_t> bits;
  bits.resize(n);
  uint32_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, v + i, sizeof b);
    b &= 0x7FFFFFFFu;
    bits[i] = b;
    most = std::max(most, b);
  }
  if (most > 0x7F800000u) return std::nullopt;  // a NaN
  const auto count_at_least = [&](uint32_t t) {
    size_t count = 0, i = 0;
#if defined(__SSE2__)
    // Patterns are <= 0x7F800000 here, so a signed compare against t - 1 is the unsigned >= t.
    const __m128i below = _mm_set1_epi32(static_cast<int>(t - 1));
    __m128i lanes = _mm_setzero_si128();
    for (; i + 4 <= n; i += 4)
      lanes = _mm_sub_epi32(lanes, _mm_cmpgt_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits.data() + i)), below));
    alignas(16) uint32_t sums[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(sums), lanes);
    count = static_cast<size_t>(sums[0]) + sums[1] + sums[2] + sums[3];
#endif
    for (; i < n; ++i) count += bits[i] >= t ? 1 : 0;
    return count;
  };
  uint32_t t = 0;
  for (int bit = most == 0 ? -1 : 31 - __builtin_clz(most); bit >= 0; --bit) {
    const uint32_t candidate = t | (1u << bit);
    const size_t count = count_at_least(candidate);
    if (count < k) continue;
    t = candidate;
    if (count == k) {  // exactly k reach t: the k-th largest is the least of them
      uint32_t least = most;
      for (size_t i = 0; i < n; ++i)
        if (bits[i] >= t) least = std::min(least, bits[i]);
      t = least;
      break;
    }
  }
  size_t above = 0;
  for (size_t i = 0; i < n; ++i) above += bits[i] > t ? 1 : 0;
  float kth;
  std::memcpy(&kth, &t, sizeof kth);
  return std::pair<float, size_t>{kth, above};
}

// The k-th largest of the magnitudes |v[0..n)| (1 <= k < n), and how many of the k largest are
// strictly above it. A few (k <= 8, DCT-DP's per-row keeps at a fixed --dp-keep): one pass that
// keeps them sorted in a small buffer (a row of random values inserts ~k ln(n / k) times), skipping
// to the next entry above the smallest kept (next_magnitude_above); more: the bitwise search above
// (a row with a NaN: the buffer up to 32, else a float nth_element).
inline std::pair<float, size_t> kth_largest_magnitude(const float* v, size_t n, size_t k) {
  const auto count_above = [k](const float* top) {
    const float kth = top[k - 1];
    size_t above = 0;
    for (size_t j = 0; j < k; ++j) above += top[j] > kth ? 1 : 0;  // nth_element leaves the k largest first
    return std::pair<float, size_t>{kth, above};
  };
  const auto in_buffer = [&] {
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
  };
  if (k <= 8) return in_buffer();
  if (const auto found = kth_largest_magnitude_bits(v, n, k)) return *found;
  if (k <= 32) return in_buffer();  // a row with a NaN
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
