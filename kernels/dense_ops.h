// Element-wise kernels of dense layers on the CPU (behind the CPU Backend, kernels/cpu_backend.h):
// bias + activation and its backward. Parallel over rows (columns for the bias gradient), each
// output element computed by one thread in a fixed order: the same bits for any thread count.
#pragma once

#include "core/act.h"
#include "core/tensor.h"

namespace frugal::kernels {

// y[i][c] = act(y[i][c] + bias[c]); relu maps v < 0 to 0 (and keeps -0).
void bias_act_forward(Tensor& y, const Tensor& bias, Act act);

// grad[i][c] = 0 where y[i][c] <= 0 (relu); bias_grad[c] = sum over i (in order) of grad[i][c].
void bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad);

// Backend::sum_squares (chunks in parallel, their sums added in order) and Backend::scale.
double sum_squares(const Tensor& x);
void scale(Tensor& x, float factor);

}  // namespace frugal::kernels
