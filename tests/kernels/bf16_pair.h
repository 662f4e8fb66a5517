// Test data for the bf16 kernels: a bf16 tensor of random values and its f32 twin holding the
// widened values (what a bf16 kernel's result is compared against).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace frugal::testing {

struct Bf16Pair {
  Tensor half, wide;
};

// rows x cols values, normal times scale, from seed.
inline Bf16Pair random_bf16_pair(size_t rows, size_t cols, uint64_t seed, float scale = 0.5f) {
  Rng rng(seed);
  Tensor f(rows, cols);
  for (size_t i = 0; i < f.size(); ++i) f.data()[i] = scale * static_cast<float>(rng.normal());
  Bf16Pair p{converted(f, Dtype::bf16), Tensor()};
  p.wide = converted(p.half, Dtype::f32);
  return p;
}

}  // namespace frugal::testing
