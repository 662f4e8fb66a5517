// Vector kernels used on active neurons: dot, axpy, scale. Compiled for AVX-512, AVX2 and a generic
// target; the CPU picks one at run time (GCC target_clones). Each keeps 16 partial sums in a fixed
// order and frugal builds in ISO C++ mode (no FMA contraction), so every variant returns the same
// bits: results do not depend on the machine's vector width.
#pragma once

#include <cstddef>

namespace frugal::kernels {

float dot(const float* a, const float* b, size_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, size_t n);
// y = alpha * x
void scale_into(float alpha, const float* x, float* y, size_t n);

}  // namespace frugal::kernels
