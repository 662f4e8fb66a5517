#include "kernels/vector_ops.h"

#include <cmath>
#include <cstring>

#include "core/tensor.h"

#define FRUGAL_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace frugal::kernels {

FRUGAL_SIMD_CLONES float dot(const float* a, const float* b, size_t n) {
  constexpr size_t kLanes = 16;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (size_t l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  // Pairwise reduction in a fixed order.
  for (size_t w = kLanes / 2; w > 0; w /= 2)
    for (size_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

FRUGAL_SIMD_CLONES void axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
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
  const uint32_t rounded = bits + random16;
  const bool special = (bits & 0x7f800000u) == 0x7f800000u;      // infinity or NaN
  const bool overflows = (rounded & 0x7f800000u) == 0x7f800000u;  // would round to infinity
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t kept = (bits >> 16) | (nan ? 0x40u : 0u);
  return static_cast<uint16_t>(special || overflows ? kept : rounded >> 16);
}
inline uint16_t nearest_bits(uint32_t bits) {
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded >> 16);
}
inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
// 32 random bits for column col of a row keyed by key: murmur3's finalizer (multiplies and shifts
// that vectorize).
inline uint32_t column_hash(uint32_t key, uint32_t col) {
  uint32_t x = key ^ (col * 0x85ebca77u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
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

FRUGAL_SIMD_CLONES void adam_row_bf16(uint16_t* __restrict w, uint16_t* __restrict m, uint16_t* __restrict v,
                                      const float* __restrict g, size_t n, float b1, float b2, float step, float c2,
                                      float eps, float keep, uint32_t key, uint32_t first_col) {
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

}  // namespace frugal::kernels
