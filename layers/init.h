// Weight initialization shared by the layers: PyTorch's nn.Linear default, U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) for weights and biases, so frugal and the PyTorch baseline start alike. Element
// (R, C) of the whole matrix is the C-th draw of stream R, so a slice of a layer starts with exactly
// the values the unsliced layer has there, whatever the number of ranks.
#pragma once

#include <cmath>

#include "core/rng.h"
#include "core/tensor.h"

namespace frugal::layers {

inline void init_uniform(Tensor& t, size_t fan_in, const Rng& rng, size_t row_offset = 0, size_t col_offset = 0) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (size_t r = 0; r < t.rows(); ++r) {
    Rng stream = rng.split(row_offset + r);
    for (size_t c = 0; c < col_offset; ++c) stream.next_u64();
    float* row = t.row(r);
    for (size_t c = 0; c < t.cols(); ++c) row[c] = stream.uniform(-bound, bound);
  }
}

}  // namespace frugal::layers
