#include "kernels/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/hash32.h"
#include "core/tensor.h"

#define FRUGAL_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace frugal::kernels {
namespace {

// dot's arithmetic for `rows` rows b[0..rows) at once (independent chains of adds, where one row's
// chain bounds the time): each row's 16 partial sums, then their pairwise reduction in a fixed order,
// so every row's result has the bits dot(a, b[j], n) returns. Inlined with a constant n, the loops
// unroll.
template <size_t Rows>
inline void dot_body(const float* a, const float* const* b, size_t n, float* out) {
  constexpr size_t kLanes = 16;
  float acc[Rows][kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < Rows; ++j)
      for (size_t l = 0; l < kLanes; ++l) acc[j][l] += a[i + l] * b[j][i + l];
  for (size_t j = 0; j < Rows; ++j)
    for (size_t l = 0; i + l < n; ++l) acc[j][l] += a[i + l] * b[j][i + l];
  for (size_t j = 0; j < Rows; ++j) {
    for (size_t w = kLanes / 2; w > 0; w /= 2)
      for (size_t l = 0; l < w; ++l) acc[j][l] += acc[j][l + w];
    out[j] = acc[j][0];
  }
}

// dot_rows for rows of n floats (n a constant where it is one of the common widths).
template <size_t N>
inline void dot_rows_of(const float* a, const float* w, size_t ld, const uint32_t* ids, size_t count, size_t n,
                        float* out) {
  const size_t width = N > 0 ? N : n;
  constexpr size_t kTogether = 2;
  size_t e = 0;
  for (; e + kTogether <= count; e += kTogether) {
    for (size_t p = e + kPrefetchRows; p < std::min(e + kPrefetchRows + kTogether, count); ++p)
      prefetch(w + ids[p] * ld, width);
    const float* b[kTogether];
    for (size_t j = 0; j < kTogether; ++j) b[j] = w + ids[e + j] * ld;
    dot_body<kTogether>(a, b, width, out + e);
  }
  for (; e < count; ++e) {
    const float* b[1] = {w + ids[e] * ld};
    dot_body<1>(a, b, width, out + e);
  }
}

}  // namespace

FRUGAL_SIMD_CLONES float dot(const float* a, const float* b, size_t n) {
  float out = 0.0f;
  dot_body<1>(a, &b, n, &out);
  return out;
}

FRUGAL_SIMD_CLONES void dot_rows(const float* a, const float* w, size_t ld, const uint32_t* ids, size_t count,
                                 size_t n, float* out) {
  switch (n) {
    case 32: return dot_rows_of<32>(a, w, ld, ids, count, n, out);
    case 64: return dot_rows_of<64>(a, w, ld, ids, count, n, out);
    case 128: return dot_rows_of<128>(a, w, ld, ids, count, n, out);
    default: return dot_rows_of<0>(a, w, ld, ids, count, n, out);
  }
}

FRUGAL_SIMD_CLONES void axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

FRUGAL_SIMD_CLONES void axpy_rows(const float* alpha, const float* x, size_t ld, const uint32_t* ids, size_t count,
                                  size_t n, bool skip_zeros, float* y) {
  size_t fetched = 0;  // rows [0, fetched) have been asked for
  const auto fetch_to = [&](size_t end) {
    for (end = std::min(end, count); fetched < end; ++fetched) prefetch(x + ids[fetched] * ld, n);
  };
  const auto next = [&](size_t e) {
    while (e < count && skip_zeros && alpha[e] == 0.0f) ++e;
    return e;
  };
  for (size_t e0 = next(0); e0 < count;) {
    const size_t e1 = next(e0 + 1);
    fetch_to(e1 + 1 + kPrefetchRows);
    const float a0 = alpha[e0];
    const float* x0 = x + ids[e0] * ld;
    if (e1 >= count) {
      for (size_t i = 0; i < n; ++i) y[i] += a0 * x0[i];
      break;
    }
    // Two rows in one pass over y: the two additions in the order two axpy calls make them.
    const float a1 = alpha[e1];
    const float* x1 = x + ids[e1] * ld;
    for (size_t i = 0; i < n; ++i) y[i] = (y[i] + a0 * x0[i]) + a1 * x1[i];
    e0 = next(e1 + 1);
  }
}

FRUGAL_SIMD_CLONES void scale_into(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

FRUGAL_SIMD_CLONES float dot_bf16(const float* a, const uint16_t* b, size_t n) {
  constexpr size_t kLanes = 16;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) acc[l] += a[i + l] * bf16_to_f32(b[i + l]);
  for (size_t l = 0; i + l < n; ++l) acc[l] += a[i + l] * bf16_to_f32(b[i + l]);
  for (size_t w = kLanes / 2; w > 0; w /= 2)
    for (size_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

FRUGAL_SIMD_CLONES void axpy_bf16(float alpha, const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * bf16_to_f32(x[i]);
}

FRUGAL_SIMD_CLONES void widen_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

namespace {
// core/tensor.h's f32_to_bf16_stochastic and f32_to_bf16 on raw bits, written as selects so that
// loops over them vectorize (the same results).
inline uint16_t stochastic_bits(uint32_t bits, uint32_t random16) {
  const uint32_t nan = (bits & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u;
  return static_cast<uint16_t>(((bits + random16) >> 16) | nan);
}
inline uint16_t nearest_bits(uint32_t bits) {
  const uint32_t nan = (bits & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u;
  return static_cast<uint16_t>(((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) | nan);
}
inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
// 32 random bits for column col of a row keyed by key (multiplies and shifts that vectorize;
// column_hash8 below is its AVX2 form).
inline uint32_t column_hash(uint32_t key, uint32_t col) { return rounding_column_hash(key, col); }
}  // namespace

FRUGAL_SIMD_CLONES void narrow_bf16_stochastic(const float* in, uint16_t* out, size_t n, uint32_t key,
                                               uint32_t first_col) {
  for (size_t i = 0; i < n; ++i)
    out[i] = stochastic_bits(bits_of(in[i]), column_hash(key, first_col + static_cast<uint32_t>(i)) >> 16);
}

FRUGAL_SIMD_CLONES void narrow_bf16_state(const float* w, const float* m, const float* v, uint16_t* w_out,
                                          uint16_t* m_out, uint16_t* v_out, size_t n, uint32_t key,
                                          uint32_t first_col) {
  if (v != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = column_hash(key, first_col + static_cast<uint32_t>(i));
      w_out[i] = stochastic_bits(bits_of(w[i]), r & 0xffffu);
      m_out[i] = nearest_bits(bits_of(m[i]));
      v_out[i] = stochastic_bits(bits_of(v[i]), r >> 16);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = column_hash(key, first_col + static_cast<uint32_t>(i));
    w_out[i] = stochastic_bits(bits_of(w[i]), r & 0xffffu);
    m_out[i] = stochastic_bits(bits_of(m[i]), r >> 16);
  }
}

namespace {

// The portable form: the scalar reference of the AVX2 form below (the same bits).
FRUGAL_SIMD_CLONES void adam_row_bf16_portable(uint16_t* __restrict w, uint16_t* __restrict m,
                                               uint16_t* __restrict v, const float* __restrict g, size_t n, float b1,
                                               float b2, float step, float c2, float eps, float keep, uint32_t key,
                                               uint32_t first_col) {
  for (size_t c = 0; c < n; ++c) {
    // kernels/optim_ops.cpp's adam_row on the widened values, then narrow_bf16_state's rounding.
    const float mc = b1 * bf16_to_f32(m[c]) + (1.0f - b1) * g[c];
    const float vc = b2 * bf16_to_f32(v[c]) + (1.0f - b2) * g[c] * g[c];
    const float wc = keep * bf16_to_f32(w[c]) - step * mc / (std::sqrt(vc * c2) + eps);
    const uint32_t r = column_hash(key, first_col + static_cast<uint32_t>(c));
    w[c] = stochastic_bits(bits_of(wc), r & 0xffffu);
    m[c] = nearest_bits(bits_of(mc));
    v[c] = stochastic_bits(bits_of(vc), r >> 16);
  }
}

#if defined(__x86_64__)
// AVX2, 8 columns at a time, written with intrinsics: the compiler's vectorization of the portable
// loop (its 16-bit selects and packs) ran at 2.4 ns per element against f32 Adam's 0.37. Separate
// multiplies and adds (no FMA) and the same operation order keep the portable form's bits.
__attribute__((target("avx2"))) __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
__attribute__((target("avx2"))) void store8(uint16_t* p, __m256i halves) {
  // Each 32-bit lane holds a value < 2^16: pack to 16 bits, then gather the two 64-bit halves.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(halves, halves), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
// stochastic_bits and nearest_bits on 8 lanes (random: the 16 random bits per lane).
__attribute__((target("avx2"))) __m256i nan_bit(__m256i bits) {
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  return _mm256_and_si256(_mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000)), _mm256_set1_epi32(0x40));
}
__attribute__((target("avx2"))) __m256i stochastic8(__m256 x, __m256i random) {
  const __m256i bits = _mm256_castps_si256(x);
  return _mm256_or_si256(_mm256_srli_epi32(_mm256_add_epi32(bits, random), 16), nan_bit(bits));
}
__attribute__((target("avx2"))) __m256i nearest8(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd);
  return _mm256_or_si256(_mm256_srli_epi32(rounded, 16), nan_bit(bits));
}
// column_hash (core/hash32.h's lowbias32) on 8 lanes, given col * 0x85ebca77 (kept as a running
// sum by the caller).
__attribute__((target("avx2"))) __m256i column_hash8(__m256i key, __m256i col_product) {
  __m256i x = _mm256_xor_si256(key, col_product);
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

__attribute__((target("avx2"))) void adam_row_bf16_avx2(uint16_t* __restrict w, uint16_t* __restrict m,
                                                        uint16_t* __restrict v, const float* __restrict g, size_t n,
                                                        float b1, float b2, float step, float c2, float eps,
                                                        float keep, uint32_t key, uint32_t first_col) {
  const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2), one_b1 = _mm256_set1_ps(1.0f - b1),
               one_b2 = _mm256_set1_ps(1.0f - b2), vstep = _mm256_set1_ps(step), vc2 = _mm256_set1_ps(c2),
               veps = _mm256_set1_ps(eps), vkeep = _mm256_set1_ps(keep);
  const __m256i vkey = _mm256_set1_epi32(static_cast<int>(key)), low16 = _mm256_set1_epi32(0xffff);
  // (first_col + c + lane) * 0x85ebca77, mod 2^32, advanced by 8 columns each step.
  const __m256i col_step = _mm256_set1_epi32(static_cast<int>(8u * 0x85ebca77u));
  __m256i col = _mm256_mullo_epi32(
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first_col)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
      _mm256_set1_epi32(static_cast<int>(0x85ebca77u)));
  size_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m256 gc = _mm256_loadu_ps(g + c);
    const __m256 mc = _mm256_add_ps(_mm256_mul_ps(vb1, widen8(m + c)), _mm256_mul_ps(one_b1, gc));
    const __m256 vc = _mm256_add_ps(_mm256_mul_ps(vb2, widen8(v + c)), _mm256_mul_ps(_mm256_mul_ps(one_b2, gc), gc));
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vc, vc2)), veps);
    const __m256 wc = _mm256_sub_ps(_mm256_mul_ps(vkeep, widen8(w + c)), _mm256_div_ps(_mm256_mul_ps(vstep, mc), denom));
    const __m256i r = column_hash8(vkey, col);
    store8(w + c, stochastic8(wc, _mm256_and_si256(r, low16)));
    store8(m + c, nearest8(mc));
    store8(v + c, stochastic8(vc, _mm256_srli_epi32(r, 16)));
    col = _mm256_add_epi32(col, col_step);
  }
  if (c < n)
    adam_row_bf16_portable(w + c, m + c, v + c, g + c, n - c, b1, b2, step, c2, eps, keep, key,
                           first_col + static_cast<uint32_t>(c));
}
#endif

}  // namespace

void adam_row_bf16(uint16_t* w, uint16_t* m, uint16_t* v, const float* g, size_t n, float b1, float b2, float step,
                   float c2, float eps, float keep, uint32_t key, uint32_t first_col, bool vectorized) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  if (vectorized && avx2) return adam_row_bf16_avx2(w, m, v, g, n, b1, b2, step, c2, eps, keep, key, first_col);
#endif
  adam_row_bf16_portable(w, m, v, g, n, b1, b2, step, c2, eps, keep, key, first_col);
}

}  // namespace frugal::kernels
