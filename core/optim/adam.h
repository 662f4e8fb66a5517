// Adam over row-sparse gradients (core/optim/optimizer.h explains lazy and catch-up rows). Dense layers
// list all rows every step and get ordinary Adam (AdamW with weight decay) either way. Row-wise Adam
// (Method::rowwise_adam) is this optimizer too: its row-sparse parameters go to
// Backend::rowwise_adam_rows with the same bias corrections, counts and catch-up plans.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/optim/optimizer.h"

namespace frugal::optim {

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule = {});

 private:
  void prepare(uint64_t max_count, uint64_t now) override;
  void reserve_plans(size_t plans) override;
  CatchUpPlan catch_up_plan(uint64_t last, uint64_t now, size_t slot) override;
  void update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                   std::span<const CatchUpPlan* const> plans, std::span<const uint32_t> counts, double lr) override;

  uint64_t horizon_;
  // The bias corrections as RowUpdate::corrections, in the backend's memory: the host table's
  // rows not placed yet are appended (one set of a few bytes per step), the whole table moved when
  // the backend changes or it outgrows the room.
  const Tensor& placed_corrections();

  // Bias corrections 1/(1 - beta^t) by step count t: two pow() per row per step cost more than
  // the row's update itself. Float for the updates (row t = correction1, correction2, interleaved;
  // table_ holds them where the backend computes, placed_rows_ of them current), double (up to the
  // step where they reach 1) for catch-up plans.
  std::vector<float> corrections_{0.0f, 0.0f};
  Tensor table_, table_view_;
  size_t placed_rows_ = 0;
  std::vector<std::pair<double, double>> exact_corrections_{{0.0, 0.0}};
  uint64_t corrections_end_;  // from this step on both corrections are 1 in double precision
  std::vector<double> beta1_pow_, beta2_pow_;  // beta^j for j <= horizon_
  std::vector<float> terms_;                   // per plan slot: horizon_ (weight, root) pairs
};

}  // namespace frugal::optim
