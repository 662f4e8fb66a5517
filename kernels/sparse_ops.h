// Kernels for sparse computation on the CPU (behind the CPU Backend, kernels/cpu_backend.h): sparse
// input times dense weights, dot products over each sample's active neurons, and their backward
// passes. All are parallel over samples (forward) or over weight rows (weight gradients) with
// oneTBB, so no two threads write one location and the results are the same for any thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/active_sets.h"
#include "core/parameter.h"
#include "core/sparse_batch.h"
#include "core/tensor.h"

namespace frugal::kernels {

// out (B x H) = x (B x F, sparse) * w (F x H) + bias (1 x H), then ReLU when relu is set.
void sparse_input_forward(const SparseView& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& out);

// logits[e] = <h[i], w[ids[e]]> + bias[ids[e]] for every entry e of sample i, plus
// active.logit_offsets[e] when it has any.
// logits has one entry per id.
void active_logits(const Tensor& h, const ActiveView& active, const Tensor& w, const Tensor& bias,
                   std::span<float> logits);

// grad_h[i] = sum over sample i's entries e of dlogits[e] * w[ids[e]].
void active_backward_input(const ActiveView& active, std::span<const float> dlogits,
                           const Tensor& w, Tensor& grad_h);

// Weight gradients of a layer whose row r received, from sample i, coefficient c times the vector
// vecs[i]: grad[r] = sum of c * vecs[i]; and bias_grad[r] = sum of c. Used for the input layer
// (rows = features, c = feature value, vecs = dLoss/dh) and the output layer (rows = labels,
// c = dLoss/dlogit, vecs = h). Output rows are sorted; sums run in sample order. The sorted rows come
// from a pass over every row's mark where they are many (more than 1/16 of the rows), else from a
// sort of the touched ones.
class RowAccumulator {
 public:
  explicit RowAccumulator(size_t num_rows) : slot_(num_rows, -1) {}
  void accumulate(std::span<const uint64_t> offsets, const uint32_t* ids, const float* coefs,
                  const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad);
  size_t num_rows() const { return slot_.size(); }

 private:
  std::vector<int32_t> slot_;  // row -> position in the output, -1 when not touched
  std::vector<uint64_t> row_start_, fill_;  // kept between calls: no per-step allocation
  std::vector<uint32_t> entry_sample_;
  std::vector<float> entry_coef_;
};

}  // namespace frugal::kernels
