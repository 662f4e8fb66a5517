// Vector kernels used on active neurons: dot, axpy, scale. Compiled for AVX-512, AVX2 and a generic
// target; the CPU picks one at run time (GCC target_clones). Each keeps 16 partial sums in a fixed
// order and frugal builds in ISO C++ mode (no FMA contraction), so every variant returns the same
// bits: results do not depend on the machine's vector width.
#pragma once

#include <cstddef>
#include <cstdint>

namespace frugal::kernels {

float dot(const float* a, const float* b, size_t n);
// out[e] = dot(a, w + ids[e] * ld, n) for e < count, the same bits: two rows at a time (two
// independent chains of adds), unrolled at the common widths (32, 64, 128), the rows prefetched
// kPrefetchRows ahead (an output layer's logits: one call per point over its active labels instead
// of a call per label).
void dot_rows(const float* a, const float* w, size_t ld, const uint32_t* ids, size_t count, size_t n, float* out);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, size_t n);
// y += alpha[e] * (x + ids[e] * ld) for e < count in order (skip_zeros: not where alpha[e] is 0),
// the same bits as axpy per row: two rows per pass over y, the rows prefetched kPrefetchRows ahead
// (dLoss/dh of a point over its active labels in one call).
void axpy_rows(const float* alpha, const float* x, size_t ld, const uint32_t* ids, size_t count, size_t n,
               bool skip_zeros, float* y);
// y = alpha * x
void scale_into(float alpha, const float* x, float* y, size_t n);

// The same over a bf16 row x (core/tensor.h), widened exactly: each returns the bits its f32
// counterpart returns on the widened row (the same lanes, order and roundings).
float dot_bf16(const float* a, const uint16_t* b, size_t n);
void axpy_bf16(float alpha, const uint16_t* x, float* y, size_t n);
// out = the bf16 row widened to f32.
void widen_bf16(const uint16_t* in, float* out, size_t n);
// out = in narrowed with stochastic rounding; element i's 16 random bits come from a hash of key
// and first_col + i, so the bits depend on the key (an update's seed and the row's global id) and
// the element's global column alone.
void narrow_bf16_stochastic(const float* in, uint16_t* out, size_t n, uint32_t key, uint32_t first_col);
// An optimizer's row state narrowed at once, one hash per element: w with stochastic rounding
// (the hash's low 16 bits); with a second moment v (Adam), v stochastically (the high 16 bits) and
// m to nearest (an average of recent gradients: its changes are not below a bf16 step); without
// (SGD's momentum, Adagrad's growing sum of squares), m stochastically (the high 16 bits).
void narrow_bf16_state(const float* w, const float* m, const float* v, uint16_t* w_out, uint16_t* m_out,
                       uint16_t* v_out, size_t n, uint32_t key, uint32_t first_col);

// Adam's step (kernels/optim_ops.cpp's adam_row) on one bf16 row, widening, updating and narrowing
// (as narrow_bf16_state) in one pass: the same bits as widen, adam_row, narrow_bf16_state.
// vectorized: AVX2 intrinsics where the CPU has them (false: the portable loop, for tests).
void adam_row_bf16(uint16_t* w, uint16_t* m, uint16_t* v, const float* g, size_t n, float b1, float b2, float step,
                   float c2, float eps, float keep, uint32_t key, uint32_t first_col, bool vectorized = true);

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
// The same for any row of `bytes` bytes (bf16 rows), read only or read and written.
inline void prefetch_bytes(const void* p, size_t bytes) {
  const char* b = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(b + off, 0);
}
inline void prefetch_bytes_for_write(void* p, size_t bytes) {
  char* b = static_cast<char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(b + off, 1);
}

// How many rows ahead the gathers ask for (bench/REPORT.md "Roofline" and "Less CPU per step"):
// far enough to cover the memory latency, near enough to stay in cache. The optimizer, which reads
// and writes three rows per row, asks for fewer.
inline constexpr size_t kPrefetchRows = 8;
inline constexpr size_t kPrefetchUpdateRows = 4;

}  // namespace frugal::kernels
