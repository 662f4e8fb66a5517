#include "core/optim/adam.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"

namespace frugal::optim {

AdamOptimizer::AdamOptimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule)
    : Optimizer(options, std::move(params), schedule, true) {
  FRUGAL_CHECK(options.method == Method::adam || options.method == Method::rowwise_adam,
               "AdamOptimizer: options.method is not adam or rowwise_adam");
  const double b1 = options.beta1, b2 = options.beta2;
  // Consecutive missed moves shrink by beta1 / sqrt(beta2) (m decays by beta1, sqrt(v) by
  // sqrt(beta2)). beta2 = 0 leaves no second moment to divide by: catch-up then only decays.
  horizon_ = b2 > 0 ? move_horizon(b1 / std::sqrt(b2)) : 0;
  for (uint64_t j = 0; j <= horizon_; ++j) {
    beta1_pow_.push_back(std::pow(b1, static_cast<double>(j)));
    beta2_pow_.push_back(std::pow(b2, static_cast<double>(j)));
  }
  const double largest = std::max(b1, b2);
  corrections_end_ = largest > 0 ? static_cast<uint64_t>(std::ceil(std::log(1e-17) / std::log(largest))) + 1 : 1;
}

void AdamOptimizer::prepare(uint64_t max_count, uint64_t now) {
  const float b1 = options().beta1, b2 = options().beta2;
  while (corrections_.size() / 2 <= max_count) {
    const auto t = static_cast<float>(corrections_.size() / 2);
    corrections_.push_back(1.0f / (1.0f - std::pow(b1, t)));
    corrections_.push_back(1.0f / (1.0f - std::pow(b2, t)));
  }
  if (options().updates != SparseUpdates::catchup) return;
  while (exact_corrections_.size() <= std::min(now, corrections_end_)) {
    const auto t = static_cast<double>(exact_corrections_.size());
    exact_corrections_.emplace_back(1.0 / (1.0 - std::pow(double{b1}, t)), 1.0 / (1.0 - std::pow(double{b2}, t)));
  }
}

void AdamOptimizer::reserve_plans(size_t plans) { terms_.resize(plans * 2 * horizon_); }

const Tensor& AdamOptimizer::placed_corrections() {
  Backend& be = backend();
  const size_t t = corrections_.size() / 2;
  const bool here = be.device().is_host() ? table_.is_host() : table_.owner() == &be;
  if (!here || table_.rows() < t) {  // room for twice as many: a step adds at most one row
    table_ = Tensor(std::max<size_t>(64, 2 * t), 2, Dtype::f32, be);
    table_.set_name("adam.bias_corrections");
    placed_rows_ = 0;
  }
  if (placed_rows_ < t) {
    Tensor tail = table_.rows_view(placed_rows_, t - placed_rows_);
    copy_from_host(tail, corrections_.data() + 2 * placed_rows_);
    placed_rows_ = t;
  }
  table_view_ = table_.rows_view(0, t);
  return table_view_;
}

// Dense Adam with zero gradients in steps tau = last + j, j = 1..s (s = now - last): the moments
// only decay, m_tau = beta1^j m, v_tau = beta2^j v, and the weight moves
//   w <- (1 - lr_tau wd) w - lr_tau c1(tau) beta1^j m / (sqrt(c2(tau) beta2^j v) + eps)
// with c1, c2 the bias corrections of the global step tau. With root_j = sqrt(c2(tau) beta2^j):
//   w <- (1 - lr_tau wd) w - weight_j m / (root_j sqrt(v) + eps),  weight_j = lr_tau c1(tau) beta1^j.
// The update is linear in w, so carrying each move through the later steps' decays
// P_j = prod_{k>j} (1 - lr_k wd) gives w_now = P_0 w - m sum_j weight_j P_j / (root_j sqrt(v) + eps):
// exact, one pass over the row with one division per missed step and element (eps keeps the
// terms from having a closed-form sum; dropping it would be wrong exactly where Adam needs it, for
// tiny gradients such as a sparse input layer's). The moves shrink like (beta1 / sqrt(beta2))^j:
// they are summed up to horizon_ steps (197 for the default betas), beyond which they are below
// 1e-9 of the first; the weight decay and the moments' decay cover all s steps.
// Row-wise Adam's rows take the same plan with v the row's one value (and, without a first moment,
// only its decays: no momentum moves the row).
Optimizer::CatchUpPlan AdamOptimizer::catch_up_plan(uint64_t last, uint64_t now, size_t slot) {
  const uint64_t s = now - last, horizon = std::min(s, horizon_);
  const double wd = options().weight_decay;
  float* terms = terms_.data() + slot * 2 * horizon_;
  double carried = keep(last + horizon, now);
  for (uint64_t j = horizon; j >= 1; --j) {
    const uint64_t tau = last + j;
    const auto [c1, c2] = tau < exact_corrections_.size() ? exact_corrections_[tau] : std::pair{1.0, 1.0};
    const double lr = step_lr(tau), root = std::sqrt(c2 * beta2_pow_[j]);
    terms[2 * (j - 1)] = static_cast<float>(lr * c1 * beta1_pow_[j] * carried);
    terms[2 * (j - 1) + 1] = static_cast<float>(root);
    carried *= 1.0 - lr * wd;
  }
  CatchUpPlan plan;
  plan.decay = static_cast<float>(carried);
  plan.terms = terms;
  plan.terms_count = static_cast<uint32_t>(horizon);
  plan.m_decay = static_cast<float>(std::pow(double{options().beta1}, static_cast<double>(s)));
  plan.v_decay = static_cast<float>(std::pow(double{options().beta2}, static_cast<double>(s)));
  return plan;
}

void AdamOptimizer::update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                                std::span<const CatchUpPlan* const> plans, std::span<const uint32_t> counts,
                                double lr) {
  // The rows' arithmetic is the Backend's adam_rows.
  RowUpdate u = row_update(p, s, rows, grad, plans, lr);
  u.v = &s.v;
  u.counts = counts;
  u.corrections = &placed_corrections();
  u.beta1 = options().beta1;
  u.beta2 = options().beta2;
  u.freeze_after = options().freeze_second_moment;
  u.eps = options().eps;
  if (row_wise(options(), p))
    backend().rowwise_adam_rows(u);
  else
    backend().adam_rows(u);
}

}  // namespace frugal::optim
