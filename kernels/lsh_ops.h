// LSH codes of a batch of vectors on the CPU (behind the CPU Backend, kernels/cpu_backend.h; the
// contracts are core/backend.h's SimHashSpec and DwtaSpec). Parallel over vectors; each vector's
// codes are computed by one thread, so the bits do not depend on the threads.
#pragma once

#include <cstdint>
#include <span>

#include "core/backend.h"

namespace frugal::kernels {

void simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes);
// The bins' winners go eight vectors at a time through AVX2 where the CPU has it (the block
// transposed: each coordinate one load for the eight; the same winners, compare for compare, as the
// scalar loop); `vectorized = false` forces the scalar loop (tests compare the two).
void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes,
                bool vectorized = true);
// Backend::bucket_union: per thread, a hit counter per neuron (all 0 between samples), so a
// sample costs its bucket entries, not the neuron count. Parallel over samples.
// out: host tensors, shaped here.
void bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveTensors& out);
// Backend::active_extend (core/active_extend.h's program per sample, a membership mark per neuron
// and thread); in and out are host tensors. Parallel over samples.
void active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out);
// Backend::bucket_build on host tensors: a counting sort per table (parallel over tables).
void bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids);

}  // namespace frugal::kernels
