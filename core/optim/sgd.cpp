#include "core/optim/sgd.h"

#include <algorithm>
#include <cmath>

#include "core/backend.h"
#include "core/check.h"

namespace frugal::optim {

SgdOptimizer::SgdOptimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule)
    : Optimizer(options, std::move(params), schedule, false) {
  FRUGAL_CHECK(options.method == Method::sgd, "SgdOptimizer: options.method is not sgd");
  horizon_ = move_horizon(options.momentum);
  for (uint64_t j = 0; j <= horizon_; ++j) momentum_pow_.push_back(std::pow(double{options.momentum}, double(j)));
}

// Dense SGD with zero gradients in steps tau = last + j, j = 1..s: buf_tau = momentum^j buf and
//   w <- (1 - lr_tau wd) w - lr_tau momentum^j buf,
// linear in w and buf, so the s steps collapse exactly into w_now = P_0 w - A buf with
// A = sum_j lr_tau momentum^j P_j and P_j = prod_{k>j} (1 - lr_k wd). The moves shrink like
// momentum^j: summed up to horizon_ (below 1e-9 of the first beyond it); the decay covers all s.
Optimizer::CatchUpPlan SgdOptimizer::catch_up_plan(uint64_t last, uint64_t now, size_t) {
  const uint64_t s = now - last, horizon = std::min(s, horizon_);
  const double wd = options().weight_decay;
  double carried = keep(last + horizon, now), move = 0.0;
  for (uint64_t j = horizon; j >= 1; --j) {
    const double lr = step_lr(last + j);
    move += lr * momentum_pow_[j] * carried;
    carried *= 1.0 - lr * wd;
  }
  CatchUpPlan plan;
  plan.decay = static_cast<float>(carried);
  plan.move = static_cast<float>(move);
  plan.m_decay = static_cast<float>(std::pow(double{options().momentum}, static_cast<double>(s)));
  return plan;
}

void SgdOptimizer::update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                               std::span<const CatchUpPlan* const> plans, std::span<const uint32_t>, double lr) {
  // The rows' arithmetic is the Backend's sgd_rows.
  RowUpdate u = row_update(p, s, rows, grad, plans, lr);
  u.momentum = options().momentum;
  backend().sgd_rows(u);
}

}  // namespace frugal::optim
