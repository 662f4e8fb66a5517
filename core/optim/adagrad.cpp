#include "core/optim/adagrad.h"

#include "core/backend.h"
#include "core/check.h"

namespace frugal::optim {

AdagradOptimizer::AdagradOptimizer(const Options& options, std::vector<Parameter*> params,
                                   const LrSchedule& schedule)
    : Optimizer(options, std::move(params), schedule, false, options.initial_accumulator) {
  FRUGAL_CHECK(options.method == Method::adagrad || options.method == Method::rowwise_adagrad,
               "AdagradOptimizer: options.method is not adagrad or rowwise_adagrad");
}

// Dense Adagrad with zero gradients in steps (last, now]: acc += 0 and the move lr_tau * 0 /
// (sqrt(acc) + eps) is 0, leaving w <- (1 - lr_tau wd) w per step. The whole catch-up is the
// product of those factors, exact at any distance (no horizon: nothing decays to be summed).
Optimizer::CatchUpPlan AdagradOptimizer::catch_up_plan(uint64_t last, uint64_t now, size_t) {
  CatchUpPlan plan;
  plan.decay = static_cast<float>(keep(last, now));
  return plan;
}

void AdagradOptimizer::update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                                   std::span<const CatchUpPlan* const> plans, std::span<const uint32_t>, double lr) {
  // The rows' arithmetic is the Backend's adagrad_rows.
  RowUpdate u = row_update(p, s, rows, grad, plans, lr);
  u.eps = options().adagrad_eps;
  if (row_wise(options(), p))
    backend().rowwise_adagrad_rows(u);
  else
    backend().adagrad_rows(u);
}

}  // namespace frugal::optim
