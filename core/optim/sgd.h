// SGD with (heavy-ball) momentum over row-sparse gradients, with lazy or catch-up rows (see
// core/optim/optimizer.h): buf = momentum * buf + g; w = (1 - lr * weight_decay) * w - lr * buf.
// momentum 0 is plain SGD.
#pragma once

#include <cstdint>
#include <vector>

#include "core/optim/optimizer.h"

namespace frugal::optim {

class SgdOptimizer : public Optimizer {
 public:
  SgdOptimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule = {});

 private:
  void prepare(uint64_t, uint64_t) override {}
  CatchUpPlan catch_up_plan(uint64_t last, uint64_t now, size_t slot) override;
  void update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                   std::span<const CatchUpPlan* const> plans, std::span<const uint32_t> counts, double lr) override;

  uint64_t horizon_;
  std::vector<double> momentum_pow_;  // momentum^j for j <= horizon_
};

}  // namespace frugal::optim
