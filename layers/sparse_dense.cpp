#include "layers/sparse_dense.h"

#include <algorithm>
#include <cmath>

#include <tuple>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"
#include "layers/init.h"

namespace frugal::layers {

void SparseDenseOptions::validate() const {
  FRUGAL_CHECK(in > 0 && in <= UINT32_MAX, fmt::format("SparseDense: in must be in 1..2^32-1, got {}", in));
  FRUGAL_CHECK(out > 0, fmt::format("SparseDense: out must be > 0, got {}", out));
}

struct SparseDense::BackendState {
  SparseFeatures whole;  // the last forward pass's batch where the layer computes
  SparseFeatures part;   // forward_rows' part of it
  std::unique_ptr<RowWorkspace> workspace;  // made on first use
};

SparseDense::~SparseDense() = default;

SparseDense::SparseDense(const Options& options) : options_(options), state_(std::make_unique<BackendState>()) {
  options_.validate();
  std::tie(begin_, end_) = options_.placement.own_slice(options_.out);
  const size_t local = end_ - begin_;
  // Sliced by columns: each rank holds every feature's row, restricted to its neurons.
  weight_ = {"sparse_dense.weight", Tensor(options_.in, local), {}, 1, begin_, options_.in, options_.out};
  weight_.row_sparse = true;  // a step touches the batch's features' rows
  weight_.input_rows = true;
  bias_ = {"sparse_dense.bias", Tensor(1, local), {}, 1, begin_, 1, options_.out};
  const Rng rng = Rng(options_.seed).split(0x5d);
  init_uniform(weight_.value, options_.in, rng.split(0), 0, begin_);
  init_uniform(bias_.value, options_.in, rng.split(1), 0, begin_);
  // Drawn in f32 and rounded, so a bf16 run starts from the f32 run's weights, rounded.
  if (options_.storage != Dtype::f32) weight_.value = converted(weight_.value, options_.storage);
}

namespace {
// A multiply-add per nonzero and column, the bias and activation per output; the ids, values, bias
// and output. (The distinct feature rows it read are counted by backward(), which lists them.) A
// pass in row parts counts the bias with its first part only, as the whole pass reads it once.
void count_forward(const SparseBatch& x, size_t out, bool reads_bias = true) {
  const auto nnz = static_cast<double>(x.feature_ids.size()), h = static_cast<double>(out),
             b = static_cast<double>(x.size());
  profile::count(profile::Phase::input_forward, 2.0 * nnz * h + 2.0 * b * h,
                 4.0 * (2.0 * nnz + b * h + (reads_bias ? h : 0.0)));
}
}  // namespace

void SparseDense::check_features(const SparseBatch& x) const {
  for (const uint32_t f : x.feature_ids)
    FRUGAL_CHECK(f < options_.in, fmt::format("SparseDense: feature id {} >= in = {}", f, options_.in));
}

const Tensor& SparseDense::forward(const SparseBatch& x) {
  const profile::Scope phase(profile::Phase::input_forward);
  check_features(x);
  keep_on(out_, backend());
  // The input batch enters the step here, once: backward() reads the same copy.
  state_->whole.assign(x, backend());
  backend().sparse_input_forward(state_->whole, weight_.value, bias_.value, options_.act, out_);
  count_forward(x, local_out());
  return out_;
}

const Tensor& SparseDense::forward_rows(const SparseBatch& x, size_t first, size_t count) {
  const profile::Scope phase(profile::Phase::input_forward);
  if (first == 0) {  // the whole batch's ids are checked before any part travels
    check_features(x);
    keep_on(out_, backend());
    keep_on(part_out_, backend());
    out_.resize(x.size(), local_out());
  }
  FRUGAL_CHECK(out_.rows() == x.size() && first <= x.size() && count <= x.size() - first,
               fmt::format("SparseDense::forward_rows: rows {}..{} of a batch of {} (parts must start at row 0)",
                           first, first + count, x.size()));
  part_.assign_points(x, first, count);
  state_->part.assign(part_, backend());
  backend().sparse_input_forward(state_->part, weight_.value, bias_.value, options_.act, part_out_);
  // backward() reads the whole batch: its copy is made with the last part.
  if (first + count == x.size()) state_->whole.assign(x, backend());
  const size_t w = local_out();
  copy_rows(out_, first, part_out_, 0, count);
  count_forward(part_, w, first == 0);
  return out_;
}

void SparseDense::backward(const SparseBatch& x, const Tensor& grad_out) {
  const profile::Scope phase(profile::Phase::input_backward);
  const size_t out = local_out();
  FRUGAL_CHECK(grad_out.rows() == x.size() && grad_out.cols() == out,
               "SparseDense::backward: gradient shape does not match the batch");
  Backend& be = backend();
  // dL/d(pre-activation): the ReLU passes the gradient where the output is positive; the bias
  // gradient is its column sums.
  grad_pre_ = grad_out;
  bias_.grad.rows.assign(1, 0);
  keep_on(bias_.grad.values, be);
  keep_on(weight_.grad.values, be);
  bias_.grad.values.resize(1, out);
  be.bias_act_backward(grad_pre_, out_, options_.act, bias_.grad.values);
  FRUGAL_CHECK(state_->whole.size() == x.size(), "SparseDense::backward: not the batch of the last forward pass");
  if (!be.device().is_host()) {
    // A device keeps the row list it finds where it computes; the host lists the same rows from its
    // copy of the batch (the ids were checked by forward), so the list never comes down.
    if (distinct_.num_rows() < options_.in) distinct_ = DistinctRows(options_.in);
    distinct_.list(x.feature_ids, weight_.grad.rows);
  }
  be.sparse_input_backward(row_workspace(be, state_->workspace, options_.in), state_->whole, grad_pre_, weight_.grad);
  // The forward's reads of the batch's distinct feature rows, now that they are listed; then the
  // activation's gradient (output and gradient read, gradient written) and a multiply-add per
  // nonzero and column into the distinct rows' gradients (ids, values read; rows written once).
  const auto nnz = static_cast<double>(x.feature_ids.size()), h = static_cast<double>(out),
             b = static_cast<double>(x.size()), rows = static_cast<double>(weight_.grad.rows.size());
  const auto wb = static_cast<double>(dtype_bytes(weight_.value.dtype()));  // 4, or 2 in bf16
  profile::count(profile::Phase::input_forward, 0.0, wb * rows * h, wb * rows * h);
  profile::count(profile::Phase::input_backward, 2.0 * nnz * h + 2.0 * b * h,
                 4.0 * (3.0 * b * h + 2.0 * nnz + rows * h + rows));
}

}  // namespace frugal::layers
