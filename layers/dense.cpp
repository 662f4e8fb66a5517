#include "layers/dense.h"

#include <numeric>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/step_profile.h"
#include "layers/init.h"

namespace frugal::layers {

void DenseOptions::validate() const {
  FRUGAL_CHECK(in > 0, fmt::format("Dense: in must be > 0, got {}", in));
  FRUGAL_CHECK(out > 0, fmt::format("Dense: out must be > 0, got {}", out));
}

Dense::Dense(const Options& options) : options_(options) {
  options_.validate();
  std::tie(begin_, end_) = options_.placement.own_slice(options_.out);
  const size_t local = end_ - begin_;
  // Sliced by rows (neurons), as the softmax: a checkpoint reslices onto any number of ranks.
  weight_ = {"dense.weight", Tensor(local, options_.in), {}, 0, begin_, options_.out, options_.in};
  bias_ = {"dense.bias", Tensor(local, 1), {}, 0, begin_, options_.out, 1};
  const Rng rng = Rng(options_.seed).split(0xde);
  // Row offsets: a slice starts with the values the unsliced layer has there.
  init_uniform(weight_.value, options_.in, rng.split(0), begin_);
  init_uniform(bias_.value, options_.in, rng.split(1), begin_);
}

const Tensor& Dense::forward(const Tensor& in) {
  const profile::Scope phase(profile::Phase::dense_layers);
  FRUGAL_CHECK(in.cols() == options_.in, fmt::format("Dense: input has {} columns, expected {}", in.cols(), options_.in));
  const size_t b = in.rows(), n = end_ - begin_;
  Backend& be = backend();
  keep_on(out_, be);
  out_.resize(b, n);
  be.matmul(in, false, weight_.value, true, out_);
  be.bias_act_forward(out_, bias_.value, options_.act);
  // One matrix product (weights and input read once, output written) and the bias pass.
  const auto bd = static_cast<double>(b), nd = static_cast<double>(n), kd = static_cast<double>(options_.in);
  profile::count(profile::Phase::dense_layers, 2.0 * bd * nd * kd + 2.0 * bd * nd,
                 4.0 * (nd * kd + bd * kd + 3.0 * bd * nd + nd));
  return out_;
}

const Tensor& Dense::backward(const Tensor& in, const Tensor& grad_out) {
  const profile::Scope phase(profile::Phase::dense_layers);
  const size_t b = in.rows(), n = end_ - begin_, k = options_.in;
  FRUGAL_CHECK(grad_out.rows() == b && grad_out.cols() == n, "Dense::backward: gradient shape does not match");
  Backend& be = backend();
  // dL/d(pre-activation) and the bias gradient (its column sums).
  grad_pre_ = grad_out;
  keep_on(bias_.grad.values, be);
  keep_on(weight_.grad.values, be);
  bias_.grad.values.resize(n, 1);
  be.bias_act_backward(grad_pre_, out_, options_.act, bias_.grad.values);
  // Every row of a dense layer gets a gradient every step. Set each time: the replicas' exchange
  // (DCT-DP) may have left only the rows some replica sent.
  weight_.grad.rows.resize(n);
  std::iota(weight_.grad.rows.begin(), weight_.grad.rows.end(), 0u);
  bias_.grad.rows = weight_.grad.rows;
  weight_.grad.values.resize(n, k);
  be.matmul(grad_pre_, true, in, false, weight_.grad.values);
  keep_on(grad_in_, be);
  grad_in_.resize(b, k);
  be.matmul(grad_pre_, false, weight_.value, false, grad_in_);
  // Two matrix products (weight gradient, input gradient) and the activation's gradient.
  const auto bd = static_cast<double>(b), nd = static_cast<double>(n), kd = static_cast<double>(k);
  profile::count(profile::Phase::dense_layers, 4.0 * bd * nd * kd + 2.0 * bd * nd,
                 4.0 * (2.0 * nd * kd + 3.0 * bd * kd + 4.0 * bd * nd + nd));
  return grad_in_;
}

}  // namespace frugal::layers
