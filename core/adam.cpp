#include "core/adam.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"

namespace frugal::optim {
namespace {

// One row's update, compiled for AVX-512, AVX2 and generic x86-64 (picked at run time); the
// arithmetic is element-wise, so every variant gives the same bits.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_row(
    float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g, size_t n, float b1,
    float b2, float step, float c2, float eps) {
  for (size_t c = 0; c < n; ++c) {
    m[c] = b1 * m[c] + (1.0f - b1) * g[c];
    v[c] = b2 * v[c] + (1.0f - b2) * g[c] * g[c];
    w[c] -= step * m[c] / (std::sqrt(v[c] * c2) + eps);
  }
}

}  // namespace

void Adam::validate() const {
  FRUGAL_CHECK(lr > 0 && std::isfinite(lr), fmt::format("Adam: lr must be > 0, got {}", lr));
  FRUGAL_CHECK(beta1 >= 0 && beta1 < 1, fmt::format("Adam: beta1 must be in [0, 1), got {}", beta1));
  FRUGAL_CHECK(beta2 >= 0 && beta2 < 1, fmt::format("Adam: beta2 must be in [0, 1), got {}", beta2));
  FRUGAL_CHECK(eps > 0, fmt::format("Adam: eps must be > 0, got {}", eps));
}

AdamOptimizer::AdamOptimizer(const Adam& options, std::vector<Parameter*> params)
    : options_(options), params_(std::move(params)), state_(params_.size()) {
  options_.validate();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& w = params_[i]->value;
    state_[i].m = Tensor(w.rows(), w.cols());
    state_[i].v = Tensor(w.rows(), w.cols());
    state_[i].row_steps.assign(w.rows(), 0);
  }
}

void AdamOptimizer::step() {
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps, lr = options_.lr;
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    State& s = state_[i];
    const size_t cols = p.value.cols();
    const auto& rows = p.grad.rows;
    FRUGAL_CHECK(p.grad.values.rows() == rows.size() && (rows.empty() || p.grad.values.cols() == cols),
                 fmt::format("parameter {}: gradient shape does not match its row list", p.name));
    // Rows are independent, so the result does not depend on how TBB splits the range.
    // Bias corrections come from a table indexed by the row's step count: two pow() per row per
    // step cost more than the row's update itself.
    uint32_t most = 0;
    for (const uint32_t r : rows) most = std::max(most, s.row_steps[r] + 1);
    while (correction1_.size() <= most) {
      const auto t = static_cast<float>(correction1_.size());
      correction1_.push_back(1.0f / (1.0f - std::pow(b1, t)));
      correction2_.push_back(1.0f / (1.0f - std::pow(b2, t)));
    }
    tbb::parallel_for(tbb::blocked_range<size_t>(0, rows.size(), 64), [&](const auto& range) {
      for (size_t j = range.begin(); j < range.end(); ++j) {
        const uint32_t r = rows[j];
        const uint32_t t = ++s.row_steps[r];
        const float c1 = correction1_[t], c2 = correction2_[t];
        adam_row(p.value.row(r), s.m.row(r), s.v.row(r), p.grad.values.row(j), cols, b1, b2, lr * c1, c2, eps);
      }
    });
  }
}

}  // namespace frugal::optim
