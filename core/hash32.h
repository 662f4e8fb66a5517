// lowbias32: a 32-bit integer hash (two multiply-xorshift rounds, Chris Wellons's constants), a
// bijection with good avalanche. Shared by the synthetic CTR generator's id maps and the
// stochastic rounding of bf16 updates (kernels/vector_ops.cpp, which also has an 8-lane AVX2 form
// of it: the two must stay the same function). The CUDA kernels (gpu/cuda_kernels.cu) call these
// same functions, so a bf16 update rounds alike on both backends.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace frugal {

FRUGAL_HOST_DEVICE inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The stochastic rounding of a bf16 update (core/backend.h's RowUpdate): the key of the parameter's
// row `row` (its position in the whole parameter) for the update seeded round_seed, and the 32
// random bits of column `col` (in the whole parameter) of a row with that key.
FRUGAL_HOST_DEVICE inline uint32_t rounding_row_key(uint64_t round_seed, uint64_t row) {
  uint64_t key = round_seed ^ (row * 0x9e3779b97f4a7c15ull);
  key ^= key >> 32;
  return static_cast<uint32_t>(key);
}
FRUGAL_HOST_DEVICE inline uint32_t rounding_column_hash(uint32_t key, uint32_t col) {
  return lowbias32(key ^ (col * 0x85ebca77u));
}

}  // namespace frugal
