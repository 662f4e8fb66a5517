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

// Asks the memory system for the n floats at p before they are used: for rows read at scattered
// positions (a batch's active labels, its features, the optimizer's touched rows), whose next
// address the hardware prefetcher cannot guess. A hint only: it changes no result.
inline void prefetch(const float* p, size_t n) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (size_t off = 0; off < n * sizeof(float); off += 64) __builtin_prefetch(bytes + off, 0);
}
// The same for rows about to be read and written.
inline void prefetch_for_write(float* p, size_t n) {
  char* bytes = reinterpret_cast<char*>(p);
  for (size_t off = 0; off < n * sizeof(float); off += 64) __builtin_prefetch(bytes + off, 1);
}
// How many rows ahead the gathers ask for (measured at 1M labels, hidden 128; bench/REPORT.md
// "Roofline"): far enough to cover the memory latency, near enough to stay in cache.
inline constexpr size_t kPrefetchRows = 4;

}  // namespace frugal::kernels
