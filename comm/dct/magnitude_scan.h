// Scans for the next entry whose magnitude reaches a bound: the inner loop of DCT's top-k by
// magnitude (comm/dct/largest.h). Most of a row is below the bound (a 128-wide row with k = 3
// inserts ~11 candidates), so four magnitudes are compared at once (SSE2, which every x86-64 CPU
// has); inline, so a row's scan costs no call per candidate.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace frugal::comm {

// The scalar loop: the reference, and the tail (and the whole scan off x86-64).
inline size_t next_magnitude_above_scalar(const float* v, size_t from, size_t n, float t, bool or_equal) {
  for (size_t i = from; i < n; ++i) {
    const float m = std::abs(v[i]);
    if (or_equal ? m >= t : m > t) return i;
  }
  return n;
}

// The first i in [from, n) with |v[i]| > t (or_equal: >= t); n when there is none. A NaN entry
// never qualifies (its comparisons are false), as in the scalar `std::abs(v[i]) > t`.
inline size_t next_magnitude_above(const float* v, size_t from, size_t n, float t, bool or_equal = false) {
  size_t i = from;
#if defined(__SSE2__)
  const __m128 bound = _mm_set1_ps(t);
  const __m128 sign = _mm_set1_ps(-0.0f);
  for (; i + 4 <= n; i += 4) {
    const __m128 m = _mm_andnot_ps(sign, _mm_loadu_ps(v + i));
    // Ordered comparisons (cmpgt / cmpge): false for a NaN.
    const int mask = _mm_movemask_ps(or_equal ? _mm_cmpge_ps(m, bound) : _mm_cmpgt_ps(m, bound));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  return next_magnitude_above_scalar(v, i, n, t, or_equal);
}

}  // namespace frugal::comm
