#include "layers/sparse_dense.h"

#include <cmath>

#include <tuple>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "layers/init.h"

namespace frugal::layers {

void SparseDenseOptions::validate() const {
  FRUGAL_CHECK(in > 0 && in <= UINT32_MAX, fmt::format("SparseDense: in must be in 1..2^32-1, got {}", in));
  FRUGAL_CHECK(out > 0, fmt::format("SparseDense: out must be > 0, got {}", out));
}

SparseDense::SparseDense(const Options& options) : options_(options) {
  options_.validate();
  std::tie(begin_, end_) = options_.placement.own_slice(options_.out);
  const size_t local = end_ - begin_;
  // Sliced by columns: each rank holds every feature's row, restricted to its neurons.
  weight_ = {"sparse_dense.weight", Tensor(options_.in, local), {}, 1, begin_, options_.in, options_.out};
  bias_ = {"sparse_dense.bias", Tensor(1, local), {}, 1, begin_, 1, options_.out};
  const Rng rng = Rng(options_.seed).split(0x5d);
  init_uniform(weight_.value, options_.in, rng.split(0), 0, begin_);
  init_uniform(bias_.value, options_.in, rng.split(1), 0, begin_);
}

const Tensor& SparseDense::forward(const SparseBatch& x) {
  for (const uint32_t f : x.feature_ids)
    FRUGAL_CHECK(f < options_.in, fmt::format("SparseDense: feature id {} >= in = {}", f, options_.in));
  backend().sparse_input_forward(x, weight_.value, bias_.value, options_.act, out_);
  return out_;
}

void SparseDense::backward(const SparseBatch& x, const Tensor& grad_out) {
  const size_t out = local_out();
  FRUGAL_CHECK(grad_out.rows() == x.size() && grad_out.cols() == out,
               "SparseDense::backward: gradient shape does not match the batch");
  Backend& be = backend();
  // dL/d(pre-activation): the ReLU passes the gradient where the output is positive; the bias
  // gradient is its column sums.
  grad_pre_ = grad_out;
  bias_.grad.rows.assign(1, 0);
  bias_.grad.values.resize(1, out);
  be.bias_act_backward(grad_pre_, out_, options_.act, bias_.grad.values);
  be.sparse_input_backward(row_workspace(be, workspace_, options_.in), x, grad_pre_, weight_.grad);
}

}  // namespace frugal::layers
