#include "kernels/vector_ops.h"

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

}  // namespace frugal::kernels
