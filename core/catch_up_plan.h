// What a row missed while it had no gradient (core/optim/optimizer.h, catch-up mode): the
// optimizers make one plan per distinct last step, and the backend's row_update op applies it
// (core/backend.h, internal). Public because an optimizer's catch_up_plan() returns it.
#pragma once

#include <cstdint>

namespace frugal {

// Element-wise: SGD: w = decay * w - move * m; Adam: w = decay * w - m * sum_j terms[2j] /
// (terms[2j + 1] * sqrt(v) + eps) over terms_count steps. Then m *= m_decay, v *= v_decay. Adagrad:
// w = decay * w only (zero gradients leave its accumulator as it is; the other fields are unused).
struct CatchUpPlan {
  float decay = 1, move = 0, m_decay = 1, v_decay = 1;
  const float* terms = nullptr;
  uint32_t terms_count = 0;
};

}  // namespace frugal
