// Adagrad over row-sparse gradients (and row-wise Adagrad: --optimizer rowwise-adagrad, one
// accumulator per row of a Parameter::row_sparse parameter, Backend::rowwise_adagrad_rows; its
// missed steps are the same weight decay), with lazy or catch-up rows (see core/optim/optimizer.h):
// acc = acc + g^2; w = (1 - lr * weight_decay) * w - lr * g / (sqrt(acc) + eps), PyTorch's update
// without its lr decay, with decoupled weight decay and the accumulator starting at
// options.initial_accumulator. A zero gradient changes neither acc nor w, so a row that misses
// steps owes only their weight decay: lazy rows without weight decay are dense Adagrad exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "core/optim/optimizer.h"

namespace frugal::optim {

class AdagradOptimizer : public Optimizer {
 public:
  AdagradOptimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule = {});

 private:
  void prepare(uint64_t, uint64_t) override {}
  CatchUpPlan catch_up_plan(uint64_t last, uint64_t now, size_t slot) override;
  void update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                   std::span<const CatchUpPlan* const> plans, std::span<const uint32_t> counts, double lr) override;
};

}  // namespace frugal::optim
