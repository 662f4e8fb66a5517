#include "core/train/sgd.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace frugal::optim {
namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void sgd_row(float* __restrict w, float* __restrict buf,
                                                                          const float* __restrict g, size_t n,
                                                                          float momentum, float lr, float keep) {
  for (size_t c = 0; c < n; ++c) {
    buf[c] = momentum * buf[c] + g[c];
    w[c] = keep * w[c] - lr * buf[c];
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void sgd_catch_up_row(float* __restrict w,
                                                                                   float* __restrict buf, size_t n,
                                                                                   float decay, float move,
                                                                                   float buf_decay) {
  for (size_t c = 0; c < n; ++c) {
    w[c] = decay * w[c] - move * buf[c];
    buf[c] *= buf_decay;
  }
}

}  // namespace

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

void SgdOptimizer::update_row(float* w, float* m, float*, const float* g, size_t cols, const CatchUpPlan* plan,
                              double lr, uint64_t) const {
  if (plan != nullptr) sgd_catch_up_row(w, m, cols, plan->decay, plan->move, plan->m_decay);
  if (g == nullptr) return;
  sgd_row(w, m, g, cols, options().momentum, static_cast<float>(lr),
          static_cast<float>(1.0 - lr * options().weight_decay));
}

}  // namespace frugal::optim
