// Dense matrix multiplication through oneDNN. C (M x N) = op(A) * op(B) (+ C when accumulate),
// row-major; op(A) is A (M x K) or, with trans_a, the transpose of A stored as K x M; likewise B
// (K x N, or N x K with trans_b). Primitives are created once per shape and reused.
// oneDNN runs on its own OpenMP threads: never call this from inside a TBB parallel loop.
#pragma once

#include <cstdint>

namespace frugal::kernels {

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
            int64_t n, int64_t k, bool accumulate = false);

// The same product with bf16 operands and f32 sums (`--precision bf16`'s dense products): A and B
// are rounded to bf16 (to nearest, ties to even, as core/tensor.h's f32_to_bf16; with AVX512-BF16's
// conversion, which reads values below 2^-126 as 0 as the dot instruction does) into scratch, then
// multiplied by oneDNN's bf16 matmul, whose bf16 products are exact in f32 and summed in f32. C
// stays f32. Fast only where the CPU has AVX512-BF16 (kernels/bf16_dot.h), the only place the CPU
// backend calls it; oneDNN may have no bf16 matmul at all on a CPU without AVX-512 (dnnl::error).
// A small product runs on fewer threads (one per 2^22 multiply-adds at most): oneDNN's bf16 kernel
// split a 128x64x256 product over 2 threads at twice the time of 1.
void matmul_bf16(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
                 int64_t n, int64_t k, bool accumulate = false);

// Sets the threads used by oneDNN (OpenMP) and oneTBB for the rest of the process; 0 = all cores.
void set_num_threads(int threads);
int num_threads();

}  // namespace frugal::kernels
