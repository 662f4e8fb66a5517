// Adam with lazy updates: a step touches only the rows that have a gradient (RowGrad::rows), and
// each row keeps its own step count so its bias correction is that of the updates it actually got
// (as in SLIDE's sparse Adam). Dense layers list all rows and get ordinary Adam.
#pragma once

#include <cstdint>
#include <vector>

#include "core/parameter.h"


namespace frugal::optim {

struct Adam {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  void validate() const;
};

class AdamOptimizer {
 public:
  AdamOptimizer(const Adam& options, std::vector<Parameter*> params);
  // Applies every parameter's row gradient, then leaves the gradients as they were.
  void step();
  const Adam& options() const { return options_; }
  // Per-parameter state, in the order of the parameter list (checkpoints read and write it).
  struct State {
    Tensor m, v;
    std::vector<uint32_t> row_steps;
  };
  State& state(size_t i) { return state_.at(i); }
  const State& state(size_t i) const { return state_.at(i); }

 private:
  Adam options_;
  std::vector<Parameter*> params_;
  std::vector<State> state_;
  // Bias corrections 1/(1 - beta^t) by step count t.
  std::vector<float> correction1_{0.0f}, correction2_{0.0f};
};

}  // namespace frugal::optim
