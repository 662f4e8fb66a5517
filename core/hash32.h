// lowbias32: a 32-bit integer hash (two multiply-xorshift rounds, Chris Wellons's constants), a
// bijection with good avalanche. Shared by the synthetic CTR generator's id maps and the
// stochastic rounding of bf16 updates (kernels/vector_ops.cpp, which also has an 8-lane AVX2 form
// of it: the two must stay the same function).
#pragma once

#include <cstdint>

namespace frugal {

inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

}  // namespace frugal
