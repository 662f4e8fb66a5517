// How one optimizer state tensor (m or v) lies beside its weights w: absent, one value per element
// (w's shape), one f32 per row (a single column beside a wider w: row-wise state), or neither
// (damage). Checkpoints compare a stored slice's layouts with the run's and convert between them
// when a parameter is resliced, so every reader tells row-wise state the same way. Header-only: the
// checkpoint readers (and their fuzzer) need it without the optimizers.
#pragma once

#include "core/tensor.h"

namespace frugal::optim {

enum class StateLayout { none, per_element, per_row, invalid };

inline StateLayout state_layout(const Tensor& state, const Tensor& w) {
  if (state.empty()) return StateLayout::none;
  if (state.rows() != w.rows()) return StateLayout::invalid;
  if (state.cols() == w.cols()) return StateLayout::per_element;
  return state.cols() == 1 ? StateLayout::per_row : StateLayout::invalid;
}

}  // namespace frugal::optim
