// Weight initialization shared by the layers: PyTorch's nn.Linear default, U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) for weights and biases, so frugal and the PyTorch baseline start alike.
#pragma once

#include <cmath>

#include "core/rng.h"
#include "core/tensor.h"

namespace frugal::layers {

inline void init_uniform(Tensor& weight, Tensor& bias, size_t fan_in, Rng rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (size_t i = 0; i < weight.size(); ++i) weight.data()[i] = rng.uniform(-bound, bound);
  for (size_t i = 0; i < bias.size(); ++i) bias.data()[i] = rng.uniform(-bound, bound);
}

}  // namespace frugal::layers
