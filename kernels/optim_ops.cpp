#include "kernels/optim_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/hash32.h"
#include "core/parallel_rows.h"
#include "core/rowwise.h"
#include "kernels/vector_ops.h"

namespace frugal::kernels {
namespace {

// One entry's update, shared by the row and column loops below so both make the same roundings.
// keep = 1 - lr * weight_decay (w * 1.0f is exact: without decay the update is bitwise what it was
// before decay existed).
inline void adam_entry(float& w, float& m, float& v, float g, float b1, float b2, float step, float c2, float eps,
                       float keep) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
  w = keep * w - step * m / (std::sqrt(v * c2) + eps);
}

// One row's update.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_row(
    float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g, size_t n, float b1,
    float b2, float step, float c2, float eps, float keep) {
  for (size_t c = 0; c < n; ++c) adam_entry(w[c], m[c], v[c], g[c], b1, b2, step, c2, eps, keep);
}

// Rows of one column (a bias): each row's update as adam_row's for n = 1, the rows in one loop (a
// call and three prefetches per one-float row cost ~1 ms of a 10 ms optimizer phase at 100k labels).
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_column(
    float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g,
    const uint32_t* __restrict rows, const uint32_t* __restrict counts, size_t n, float b1, float b2, float lr,
    const float* __restrict corrections, float eps, float keep) {
  for (size_t j = 0; j < n; ++j) {
    const uint32_t r = rows[j];
    const float* c = corrections + 2 * size_t{counts[j]};
    adam_entry(w[r], m[r], v[r], g[j], b1, b2, lr * c[0], c[1], eps, keep);
  }
}

// A row whose second moment is frozen (RowUpdate::freeze_after): v changes only where it is below
// `floor` g^2 (RowUpdate::frozen_floor), which bounds the step of an entry whose v was ~0 at the freeze.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_row_frozen(
    float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g, size_t n, float b1,
    float floor, float step, float c2, float eps, float keep) {
  for (size_t c = 0; c < n; ++c) {
    m[c] = b1 * m[c] + (1.0f - b1) * g[c];
    v[c] = std::max(v[c], floor * g[c] * g[c]);
    w[c] = keep * w[c] - step * m[c] / (std::sqrt(v[c] * c2) + eps);
  }
}

// The missed steps of a row (train/adam.cpp's catch_up_plan): w = decay * w - m * sum_j
// weight_j / (root_j * sqrt(v) + eps). Columns go in chunks so that the sum over steps runs
// vectorized across columns.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_catch_up_row(
    float* __restrict w, float* __restrict m, float* __restrict v, size_t n, float decay, const float* __restrict terms,
    size_t steps, float eps, float m_decay, float v_decay) {
  constexpr size_t kChunk = 64;
  float root_v[kChunk], sum[kChunk];
  for (size_t c0 = 0; c0 < n; c0 += kChunk) {
    const size_t len = std::min(kChunk, n - c0);
    for (size_t c = 0; c < len; ++c) {
      root_v[c] = std::sqrt(v[c0 + c]);
      sum[c] = 0.0f;
    }
    for (size_t j = 0; j < steps; ++j) {
      const float weight = terms[2 * j], root = terms[2 * j + 1];
      for (size_t c = 0; c < len; ++c) sum[c] += weight / (root * root_v[c] + eps);
    }
    for (size_t c = 0; c < len; ++c) {
      w[c0 + c] = decay * w[c0 + c] - sum[c] * m[c0 + c];
      m[c0 + c] *= m_decay;
      v[c0 + c] *= v_decay;
    }
  }
}

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

// PyTorch's Adagrad order: the accumulator first, then the step divided by its root.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adagrad_row(float* __restrict w,
                                                                              float* __restrict acc,
                                                                              const float* __restrict g, size_t n,
                                                                              float lr, float eps, float keep) {
  for (size_t c = 0; c < n; ++c) {
    acc[c] += g[c] * g[c];
    w[c] = keep * w[c] - lr * g[c] / (std::sqrt(acc[c]) + eps);
  }
}

// Adagrad's missed steps are weight decay only (train/adagrad.cpp): the accumulator stays.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adagrad_catch_up_row(float* __restrict w, size_t n,
                                                                                       float decay) {
  for (size_t c = 0; c < n; ++c) w[c] *= decay;
}

// A step of one size for the whole row (row-wise optimizers): w = keep w - step g.
__attribute__((target_clones("avx512f", "avx2", "default"))) void scaled_step_row(float* __restrict w,
                                                                                  const float* __restrict g, size_t n,
                                                                                  float step, float keep) {
  for (size_t c = 0; c < n; ++c) w[c] = keep * w[c] - step * g[c];
}

// Row-wise Adam's per-element part of one row (the row's scalars come first, in rowwise_adam_rows):
// the catch-up w = decay w - move m, m *= m_decay, then with a gradient m = b1 m + (1 - b1) g and
// w = keep w - step m. Without a first moment (m null) the step is w = keep w - step g.
__attribute__((target_clones("avx512f", "avx2", "default"))) void rowwise_adam_row(
    float* __restrict w, float* __restrict m, const float* __restrict g, size_t n, bool catch_up, float decay,
    float move, float m_decay, float b1, float step, float keep) {
  if (catch_up) {
    if (m != nullptr) {
      for (size_t c = 0; c < n; ++c) {
        w[c] = decay * w[c] - move * m[c];
        m[c] *= m_decay;
      }
    } else {
      for (size_t c = 0; c < n; ++c) w[c] *= decay;
    }
  }
  if (g == nullptr) return;
  if (m == nullptr) return scaled_step_row(w, g, n, step, keep);
  for (size_t c = 0; c < n; ++c) {
    m[c] = b1 * m[c] + (1.0f - b1) * g[c];
    w[c] = keep * w[c] - step * m[c];
  }
}

// Rows per task of the row updates (each row is cheap: a task of one would cost more than it does).
constexpr size_t kOptimRowGrain = 64;

// The rounding key of row r of an update: its seed and the row's id in the whole parameter.
uint32_t row_key(const RowUpdate& u, uint32_t r) { return rounding_row_key(u.round_seed, u.row_base + r); }

// Runs body(j, w, m, v) over the update's rows with f32 row pointers (v null without a second
// moment). f32 state: the rows themselves. bf16 state: the rows widened into per-thread scratch,
// updated in f32, and stored back with stochastic rounding keyed by the element's global position,
// so no bit depends on how rows are split over threads.
template <class Body>
void for_update_rows(const RowUpdate& u, bool second_moment, Body&& body) {
  const size_t cols = u.w->cols();
  Tensor* state[3] = {u.w, u.m, second_moment ? u.v : nullptr};
  if (u.w->dtype() == Dtype::f32) {
    parallel_rows(u.rows.size(), [&](size_t j) {
      // The touched rows ascend but skip: the rows a few ahead are asked for (weights and moments).
      if (j + kPrefetchUpdateRows < u.rows.size())
        for (Tensor* t : state)
          if (t != nullptr) prefetch_for_write(t->row(u.rows[j + kPrefetchUpdateRows]), cols);
      const uint32_t r = u.rows[j];
      body(j, u.w->row(r), u.m->row(r), second_moment ? u.v->row(r) : nullptr);
    }, kOptimRowGrain);
    return;
  }
  parallel_rows(u.rows.size(), [&](size_t j) {
    if (j + kPrefetchUpdateRows < u.rows.size())
      for (Tensor* t : state)
        if (t != nullptr) prefetch_bytes_for_write(t->bf16_row(u.rows[j + kPrefetchUpdateRows]), cols * sizeof(uint16_t));
    thread_local std::vector<float> scratch;
    if (scratch.size() < 3 * cols) scratch.resize(3 * cols);
    const uint32_t r = u.rows[j];
    float* wide[3] = {nullptr, nullptr, nullptr};
    for (size_t t = 0; t < 3; ++t)
      if (state[t] != nullptr) {
        wide[t] = scratch.data() + t * cols;
        widen_bf16(state[t]->bf16_row(r), wide[t], cols);
      }
    body(j, wide[0], wide[1], wide[2]);
    narrow_bf16_state(wide[0], wide[1], wide[2], state[0]->bf16_row(r), state[1]->bf16_row(r),
                      state[2] != nullptr ? state[2]->bf16_row(r) : nullptr, cols, row_key(u, r),
                      static_cast<uint32_t>(u.col_base));
  }, kOptimRowGrain);
}

// An update over every row (RowUpdate::all_rows) as the same update over the listed rows 0..R-1,
// each with the one count: the kernels below take row lists (this is only for host backends that
// were handed all_rows, e.g. the counting device's; a host optimizer lists its rows).
template <class Op>
void with_rows_listed(const RowUpdate& u, Op&& op) {
  std::vector<uint32_t> rows(u.w->rows()), counts;
  std::iota(rows.begin(), rows.end(), 0u);
  if (!u.counts.empty()) counts.assign(rows.size(), u.counts[0]);
  RowUpdate listed = u;
  listed.all_rows = false;
  listed.rows = rows;
  listed.counts = counts;
  op(listed);
}

}  // namespace

void adam_rows(const RowUpdate& u) {
  if (u.all_rows) {
    u.validate(true);
    return with_rows_listed(u, [](const RowUpdate& l) { adam_rows(l); });
  }
  u.validate(true);
  const size_t cols = u.w->cols();
  // Row t of the bias corrections: correction1(t), correction2(t).
  const float* table = u.corrections != nullptr ? u.corrections->data() : nullptr;
  const auto c1 = [&](uint32_t t) { return table[2 * size_t{t}]; };
  const auto c2 = [&](uint32_t t) { return table[2 * size_t{t} + 1]; };
  // bf16 rows without catch-up: one fused pass per row (widen, update, round) instead of three.
  if (u.w->dtype() == Dtype::bf16 && u.plans.empty() && u.grad != nullptr && u.freeze_after == 0) {
    parallel_rows(u.rows.size(), [&](size_t j) {
      if (j + kPrefetchUpdateRows < u.rows.size())
        for (Tensor* t : {u.w, u.m, u.v}) prefetch_bytes_for_write(t->bf16_row(u.rows[j + kPrefetchUpdateRows]), cols * 2);
      const uint32_t r = u.rows[j], count = u.counts[j];
      adam_row_bf16(u.w->bf16_row(r), u.m->bf16_row(r), u.v->bf16_row(r), u.grad->row(j), cols, u.beta1, u.beta2,
                    u.lr * c1(count), c2(count), u.eps, u.keep, row_key(u, r),
                    static_cast<uint32_t>(u.col_base));
    }, kOptimRowGrain);
    return;
  }
  if (cols == 1 && u.w->dtype() == Dtype::f32 && u.plans.empty() && u.grad != nullptr && u.freeze_after == 0) {
    // Rows are independent: no bit depends on the split.
    tbb::parallel_for(tbb::blocked_range<size_t>(0, u.rows.size(), 4096), [&](const auto& range) {
      adam_column(u.w->data(), u.m->data(), u.v->data(), u.grad->data() + range.begin(), u.rows.data() + range.begin(),
                  u.counts.data() + range.begin(), range.size(), u.beta1, u.beta2, u.lr, table, u.eps, u.keep);
    });
    return;
  }
  for_update_rows(u, true, [&](size_t j, float* w, float* m, float* v) {
    const CatchUpPlan* plan = u.plans.empty() ? nullptr : u.plans[j];
    if (plan != nullptr)
      adam_catch_up_row(w, m, v, cols, plan->decay, plan->terms, plan->terms_count, u.eps, plan->m_decay,
                        plan->v_decay);
    if (u.grad == nullptr) return;
    const uint32_t count = u.counts[j];
    if (u.frozen(count))
      adam_row_frozen(w, m, v, u.grad->row(j), cols, u.beta1, u.frozen_floor(table), u.lr * c1(count),
                      c2(u.freeze_after), u.eps, u.keep);
    else
      adam_row(w, m, v, u.grad->row(j), cols, u.beta1, u.beta2, u.lr * c1(count), c2(count), u.eps, u.keep);
  });
}

void sgd_rows(const RowUpdate& u) {
  if (u.all_rows) {
    u.validate(false);
    return with_rows_listed(u, [](const RowUpdate& l) { sgd_rows(l); });
  }
  u.validate(false);
  const size_t cols = u.w->cols();
  for_update_rows(u, false, [&](size_t j, float* w, float* m, float*) {
    const CatchUpPlan* plan = u.plans.empty() ? nullptr : u.plans[j];
    if (plan != nullptr) sgd_catch_up_row(w, m, cols, plan->decay, plan->move, plan->m_decay);
    if (u.grad == nullptr) return;
    sgd_row(w, m, u.grad->row(j), cols, u.momentum, u.lr, u.keep);
  });
}

void adagrad_rows(const RowUpdate& u) {
  if (u.all_rows) {
    u.validate(false);
    return with_rows_listed(u, [](const RowUpdate& l) { adagrad_rows(l); });
  }
  u.validate(false);
  const size_t cols = u.w->cols();
  for_update_rows(u, false, [&](size_t j, float* w, float* m, float*) {
    const CatchUpPlan* plan = u.plans.empty() ? nullptr : u.plans[j];
    if (plan != nullptr) adagrad_catch_up_row(w, cols, plan->decay);
    if (u.grad == nullptr) return;
    adagrad_row(w, m, u.grad->row(j), cols, u.lr, u.eps, u.keep);
  });
}

void rowwise_adagrad_rows(const RowUpdate& u) {
  u.validate(false, true);
  if (u.all_rows) return with_rows_listed(u, [](const RowUpdate& l) { rowwise_adagrad_rows(l); });
  const size_t cols = u.w->cols();
  float* acc = u.m->data();
  // Row j (row r of the parameter), its f32 values at w: the catch-up (weight decay only), then the
  // step, whose size is the row's. The accumulator is one float: no prefetch, no rounding.
  const auto update = [&](size_t j, uint32_t r, float* w) {
    const CatchUpPlan* plan = u.plans.empty() ? nullptr : u.plans[j];
    if (plan != nullptr) adagrad_catch_up_row(w, cols, plan->decay);
    if (u.grad == nullptr) return;
    const float* g = u.grad->row(j);
    acc[r] += rowwise_mean_square(g, cols);
    scaled_step_row(w, g, cols, u.lr / (std::sqrt(acc[r]) + u.eps), u.keep);
  };
  if (u.w->dtype() == Dtype::f32) {
    parallel_rows(u.rows.size(), [&](size_t j) {
      if (j + kPrefetchUpdateRows < u.rows.size()) prefetch_for_write(u.w->row(u.rows[j + kPrefetchUpdateRows]), cols);
      update(j, u.rows[j], u.w->row(u.rows[j]));
    }, kOptimRowGrain);
    return;
  }
  // bf16 weights: widened, updated, stored back with stochastic rounding keyed by the element's
  // place in the whole parameter (as the other optimizers' bf16 rows).
  parallel_rows(u.rows.size(), [&](size_t j) {
    const uint32_t r = u.rows[j];
    if (j + kPrefetchUpdateRows < u.rows.size())
      prefetch_bytes_for_write(u.w->bf16_row(u.rows[j + kPrefetchUpdateRows]), cols * sizeof(uint16_t));
    thread_local std::vector<float> wide;
    if (wide.size() < cols) wide.resize(cols);
    widen_bf16(u.w->bf16_row(r), wide.data(), cols);
    update(j, r, wide.data());
    narrow_bf16_stochastic(wide.data(), u.w->bf16_row(r), cols, row_key(u, r), static_cast<uint32_t>(u.col_base));
  }, kOptimRowGrain);
}

void rowwise_adam_rows(const RowUpdate& u) {
  u.validate(true, true);
  if (u.all_rows) return with_rows_listed(u, [](const RowUpdate& l) { rowwise_adam_rows(l); });
  const size_t cols = u.w->cols();
  const bool momentum = !u.m->empty();
  float* second = u.v->data();
  const float* table = u.corrections != nullptr ? u.corrections->data() : nullptr;
  // Row j (row r of the parameter), its f32 weights and first moment (null: none): the row's
  // scalars (core/backend.h's order: the catch-up's move from v before its decay, then v's step),
  // then the elements.
  const auto update = [&](size_t j, uint32_t r, float* w, float* m) {
    const CatchUpPlan* plan = u.plans.empty() ? nullptr : u.plans[j];
    float move = 0.0f;
    if (plan != nullptr) {
      const float root_v = std::sqrt(second[r]);
      for (uint32_t t = 0; t < plan->terms_count; ++t)
        move += plan->terms[2 * t] / (plan->terms[2 * t + 1] * root_v + u.eps);
      second[r] *= plan->v_decay;
    }
    const float* g = u.grad != nullptr ? u.grad->row(j) : nullptr;
    float step = 0.0f;
    if (g != nullptr) {
      const uint32_t count = u.counts[j];
      second[r] = u.beta2 * second[r] + (1.0f - u.beta2) * rowwise_mean_square(g, cols);
      const float rate = momentum ? u.lr * table[2 * size_t{count}] : u.lr;
      step = rate / (std::sqrt(second[r] * table[2 * size_t{count} + 1]) + u.eps);
    }
    rowwise_adam_row(w, m, g, cols, plan != nullptr, plan != nullptr ? plan->decay : 1.0f, move,
                     plan != nullptr ? plan->m_decay : 1.0f, u.beta1, step, u.keep);
  };
  if (u.w->dtype() == Dtype::f32) {
    parallel_rows(u.rows.size(), [&](size_t j) {
      if (j + kPrefetchUpdateRows < u.rows.size()) {
        const uint32_t ahead = u.rows[j + kPrefetchUpdateRows];
        prefetch_for_write(u.w->row(ahead), cols);
        if (momentum) prefetch_for_write(u.m->row(ahead), cols);
      }
      const uint32_t r = u.rows[j];
      update(j, r, u.w->row(r), momentum ? u.m->row(r) : nullptr);
    }, kOptimRowGrain);
    return;
  }
  // bf16 rows: widened, updated, stored back: w with stochastic rounding (as rowwise_adagrad_rows),
  // m to nearest (as Adam's).
  parallel_rows(u.rows.size(), [&](size_t j) {
    if (j + kPrefetchUpdateRows < u.rows.size()) {
      const uint32_t ahead = u.rows[j + kPrefetchUpdateRows];
      prefetch_bytes_for_write(u.w->bf16_row(ahead), cols * sizeof(uint16_t));
      if (momentum) prefetch_bytes_for_write(u.m->bf16_row(ahead), cols * sizeof(uint16_t));
    }
    const uint32_t r = u.rows[j];
    thread_local std::vector<float> wide;
    if (wide.size() < 2 * cols) wide.resize(2 * cols);
    float* w = wide.data();
    float* m = momentum ? wide.data() + cols : nullptr;
    widen_bf16(u.w->bf16_row(r), w, cols);
    if (m != nullptr) widen_bf16(u.m->bf16_row(r), m, cols);
    update(j, r, w, m);
    narrow_bf16_stochastic(w, u.w->bf16_row(r), cols, row_key(u, r), static_cast<uint32_t>(u.col_base));
    if (m != nullptr) {
      uint16_t* out = u.m->bf16_row(r);
      for (size_t c = 0; c < cols; ++c) out[c] = f32_to_bf16(m[c]);
    }
  }, kOptimRowGrain);
}

}  // namespace frugal::kernels
