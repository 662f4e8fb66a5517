// Optimizers: catch-up rows equal the dense optimizer (every row, every step, zero gradients where
// a row has none) for Adam, AdamW, SGD with momentum, Adagrad, row-wise Adagrad and row-wise Adam
// (with and without momentum), with learning-rate
// schedules, and
// against a scalar double-precision reference written from the textbook formulas; lazy rows do not
// (but for Adagrad without weight decay, which zero gradients leave alone). Hand-computed steps;
// schedule factors.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/optim/adagrad.h"
#include "core/optim/adam.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/optim/sgd.h"

using namespace frugal;

namespace {

constexpr size_t kRows = 6, kCols = 3;

// Row r has a gradient at step k (0-based) by a fixed pattern with gaps of every length: row 0
// every step, row 1 every other step, row 2 every 5th, row 3 at steps 0, 17 and 260 (a gap longer
// than Adam's move horizon), row 4 at step 3 only, row 5 never.
bool touched(size_t r, size_t k) {
  switch (r) {
    case 0: return true;
    case 1: return k % 2 == 0;
    case 2: return k % 5 == 1;
    case 3: return k == 0 || k == 17 || k == 260;
    case 4: return k == 3;
    default: return false;
  }
}
float gradient(size_t r, size_t k, size_t c) { return 0.05f * std::sin(1.0f + 7.0f * r + 3.0f * k + c); }

Tensor initial() {
  Tensor w(kRows, kCols);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = 0.1f * std::cos(float(i));
  return w;
}

// Trains the parameter for `steps` steps. dense: every row is listed every step (zero gradient
// where the pattern has none), which is what a dense optimizer does. The parameter is row-sparse
// (Parameter::row_sparse) for row-wise Adagrad unless `row_sparse` says otherwise.
Tensor train(const optim::Options& o, const optim::LrSchedule& schedule, bool dense, size_t steps,
             bool row_sparse = true) {
  Parameter p{"w", initial(), {}};
  p.row_sparse = row_sparse;
  auto opt = optim::Optimizer::create(o, {&p}, schedule);
  for (size_t k = 0; k < steps; ++k) {
    p.grad.rows.clear();
    for (uint32_t r = 0; r < kRows; ++r)
      if (dense || touched(r, k)) p.grad.rows.push_back(r);
    p.grad.values = Tensor(p.grad.rows.size(), kCols);
    for (size_t j = 0; j < p.grad.rows.size(); ++j)
      for (size_t c = 0; c < kCols; ++c)
        p.grad.values.at(j, c) = touched(p.grad.rows[j], k) ? gradient(p.grad.rows[j], k, c) : 0.0f;
    opt->step();
  }
  opt->catch_up();
  return p.value;
}

// Dense AdamW / SGDW / Adagrad in double precision, straight from the formulas (PyTorch's order:
// decay, moments, update with the bias corrections of the global step).
std::vector<double> reference(const optim::Options& o, const optim::LrSchedule& schedule, size_t steps) {
  const Tensor w0 = initial();
  const bool rowwise = o.method == optim::Method::rowwise_adagrad;
  const double m0 = o.method == optim::Method::adagrad || rowwise ? o.initial_accumulator : 0.0;
  std::vector<double> w(w0.data(), w0.data() + w0.size()), m(w.size(), m0), v(w.size(), 0.0);
  for (size_t k = 0; k < steps; ++k) {
    const double lr = o.lr * schedule.factor(k), t = double(k + 1);
    // Row r's mean squared gradient in step k (the row-wise statistic).
    const auto mean_square = [&](size_t r) {
      double squares = 0;
      for (size_t c = 0; c < kCols; ++c) {
        const double g = touched(r, k) ? gradient(r, k, c) : 0.0;
        squares += g * g;
      }
      return squares / kCols;
    };
    if (o.method == optim::Method::rowwise_adam) {  // v[r * kCols]: row r's second moment
      for (size_t r = 0; r < kRows; ++r) {
        double& vr = v[r * kCols];
        vr = o.beta2 * vr + (1 - o.beta2) * mean_square(r);
        const double vh = vr / (1 - std::pow(o.beta2, t));
        for (size_t c = 0; c < kCols; ++c) {
          const size_t i = r * kCols + c;
          const double g = touched(r, k) ? gradient(r, k, c) : 0.0;
          w[i] *= 1.0 - lr * o.weight_decay;
          m[i] = o.rowwise_momentum ? o.beta1 * m[i] + (1 - o.beta1) * g : g;
          const double mh = o.rowwise_momentum ? m[i] / (1 - std::pow(o.beta1, t)) : g;
          w[i] -= lr * mh / (std::sqrt(vh) + o.eps);
        }
      }
      continue;
    }
    if (rowwise) {  // m[r * kCols]: row r's accumulator, raised by the mean of its squared gradient
      for (size_t r = 0; r < kRows; ++r) {
        double& acc = m[r * kCols];
        acc += mean_square(r);
        for (size_t c = 0; c < kCols; ++c) {
          const double g = touched(r, k) ? gradient(r, k, c) : 0.0;
          w[r * kCols + c] *= 1.0 - lr * o.weight_decay;
          w[r * kCols + c] -= lr * g / (std::sqrt(acc) + o.adagrad_eps);
        }
      }
      continue;
    }
    for (size_t r = 0; r < kRows; ++r)
      for (size_t c = 0; c < kCols; ++c) {
        const size_t i = r * kCols + c;
        const double g = touched(r, k) ? gradient(r, k, c) : 0.0;
        w[i] *= 1.0 - lr * o.weight_decay;
        if (o.method == optim::Method::sgd) {
          m[i] = o.momentum * m[i] + g;
          w[i] -= lr * m[i];
        } else if (o.method == optim::Method::adagrad) {
          m[i] += g * g;
          w[i] -= lr * g / (std::sqrt(m[i]) + o.adagrad_eps);
        } else {
          m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
          v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
          const double mh = m[i] / (1 - std::pow(o.beta1, t)), vh = v[i] / (1 - std::pow(o.beta2, t));
          w[i] -= lr * mh / (std::sqrt(vh) + o.eps);
        }
      }
  }
  return w;
}

// Parameter p's one-row gradient (1, 2, 3) at row `row` (the hand-computed row-wise cases).
void gradient_123(Parameter& p, uint32_t row) {
  p.grad.rows = {row};
  p.grad.values = Tensor(1, 3);
  for (size_t c = 0; c < 3; ++c) p.grad.values.at(0, c) = float(c + 1);
}

double max_difference(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a.data()[i]) - b.data()[i]));
  return d;
}

double max_difference(const Tensor& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a.data()[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("catch-up rows equal the dense optimizer; lazy rows do not") {
  using optim::ScheduleKind;
  const size_t steps = 300;
  struct Case {
    const char* name;
    optim::Options options;
    optim::LrSchedule schedule;
  };
  const std::vector<Case> cases{
      {"adam", {.lr = 0.01f}, {}},
      {"adamw + cosine + warm-up", {.lr = 0.01f, .weight_decay = 0.5f}, {ScheduleKind::cosine, 20, steps}},
      {"adam + linear", {.lr = 0.02f, .beta1 = 0.8f, .beta2 = 0.99f}, {ScheduleKind::linear, 0, steps}},
      {"sgd momentum", {.method = optim::Method::sgd, .lr = 0.1f}, {}},
      {"sgdw + cosine + warm-up", {.method = optim::Method::sgd, .lr = 0.1f, .momentum = 0.95f, .weight_decay = 0.3f},
       {ScheduleKind::cosine, 30, steps}},
      {"plain sgd", {.method = optim::Method::sgd, .lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.1f}, {}},
      {"adagrad", optim::Adagrad{.lr = 0.05f}, {}},
      {"adagrad + decay + cosine + warm-up", optim::Adagrad{.lr = 0.05f, .weight_decay = 0.4f},
       {ScheduleKind::cosine, 20, steps}},
      {"adagrad from 0.1 + linear", optim::Adagrad{.lr = 0.02f, .initial_accumulator = 0.1f, .weight_decay = 0.2f},
       {ScheduleKind::linear, 0, steps}},
      {"rowwise adagrad", {.method = optim::Method::rowwise_adagrad, .lr = 0.05f}, {}},
      {"rowwise adagrad + decay + cosine + warm-up",
       {.method = optim::Method::rowwise_adagrad, .lr = 0.05f, .weight_decay = 0.4f}, {ScheduleKind::cosine, 20, steps}},
      {"rowwise adagrad from 0.1 + linear",
       {.method = optim::Method::rowwise_adagrad, .lr = 0.02f, .initial_accumulator = 0.1f, .weight_decay = 0.2f},
       {ScheduleKind::linear, 0, steps}},
      {"rowwise adam", optim::RowwiseAdam{.lr = 0.01f}, {}},
      {"rowwise adamw + cosine + warm-up", optim::RowwiseAdam{.lr = 0.01f, .weight_decay = 0.5f},
       {ScheduleKind::cosine, 20, steps}},
      {"rowwise adam without momentum + linear",
       optim::RowwiseAdam{.lr = 0.02f, .beta2 = 0.99f, .weight_decay = 0.2f, .momentum = false},
       {ScheduleKind::linear, 0, steps}},
      {"rowwise adam without momentum", optim::RowwiseAdam{.lr = 0.01f, .momentum = false}, {}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    optim::Options catchup = c.options, lazy = c.options;
    catchup.updates = optim::SparseUpdates::catchup;
    lazy.updates = optim::SparseUpdates::lazy;
    const Tensor dense = train(catchup, c.schedule, true, steps);
    const Tensor caught_up = train(catchup, c.schedule, false, steps);
    const Tensor lazy_w = train(lazy, c.schedule, false, steps);
    const std::vector<double> exact = reference(c.options, c.schedule, steps);
    // Dense float training itself is within rounding of the double reference...
    CHECK(max_difference(dense, exact) < 1e-6);
    // ...and catch-up sparse training equals it to float tolerance.
    CHECK(max_difference(caught_up, dense) < 5e-7);
    CHECK(max_difference(caught_up, exact) < 1e-6);
    // Dense lists every row with the right count: lazy over all rows is dense too.
    CHECK(max_difference(train(lazy, c.schedule, true, steps), dense) == 0.0);
    const bool adagrad = c.options.method == optim::Method::adagrad || c.options.method == optim::Method::rowwise_adagrad;
    if (adagrad && c.options.weight_decay == 0)
      CHECK(max_difference(lazy_w, dense) == 0.0);  // zero gradients do nothing to Adagrad
    else if (c.options.momentum > 0 || c.options.weight_decay > 0 || c.options.method == optim::Method::adam ||
             c.options.method == optim::Method::rowwise_adam)
      CHECK(max_difference(lazy_w, dense) > 1e-3);
  }
}

TEST_CASE("catch-up by hand: SGD momentum keeps moving an untouched row; lazy does not") {
  for (const auto updates : {optim::SparseUpdates::catchup, optim::SparseUpdates::lazy}) {
    Parameter p{"w", Tensor(2, 1), {}};
    p.value.fill(1.0f);
    optim::SgdOptimizer sgd({.method = optim::Method::sgd, .lr = 0.1f, .momentum = 0.5f, .updates = updates}, {&p});
    p.grad.rows = {0};
    p.grad.values = Tensor(1, 1);
    p.grad.values.fill(1.0f);
    sgd.step();  // buf = 1, w = 1 - 0.1 = 0.9
    REQUIRE(p.value.at(0, 0) == Approx(0.9f));
    p.grad.rows = {1};
    sgd.step();  // row 0 untouched: dense would do buf = 0.5, w = 0.9 - 0.05
    sgd.step();  // buf = 0.25, w = 0.85 - 0.025
    REQUIRE(p.value.at(0, 0) == Approx(0.9f));  // not yet: the row catches up when touched or flushed
    sgd.catch_up();
    const bool catchup = updates == optim::SparseUpdates::catchup;
    REQUIRE(p.value.at(0, 0) == Approx(catchup ? 0.825f : 0.9f));
    REQUIRE(sgd.state(0).m.at(0, 0) == Approx(catchup ? 0.25f : 1.0f));
    REQUIRE(sgd.state(0).row_steps[0] == (catchup ? 3u : 1u));
    if (catchup) REQUIRE(p.grad.rows == std::vector<uint32_t>{0});  // catch_up names the rows it moved
  }
}

TEST_CASE("AdamW and catch-up Adam by hand: decoupled decay, global-step bias correction") {
  Parameter p{"w", Tensor(2, 1), {}};
  p.value.fill(1.0f);
  optim::AdamOptimizer adam({.lr = 0.1f, .weight_decay = 0.5f, .updates = optim::SparseUpdates::catchup}, {&p});
  p.grad.rows = {0};
  p.grad.values = Tensor(1, 1);
  p.grad.values.fill(2.0f);
  adam.step();
  // w (1 - lr wd) - lr * m_hat / sqrt(v_hat) with m_hat / sqrt(v_hat) = 1 at the first step.
  REQUIRE(p.value.at(0, 0) == Approx(0.95f - 0.1f).epsilon(1e-6));
  // Row 1's first gradient comes at global step 2: it first decays for step 1 (its moments are 0,
  // so no move), then its bias correction is the global step's: m_hat = 0.1 g / (1 - 0.81),
  // v_hat = 0.001 g^2 / (1 - 0.998001).
  p.grad.rows = {1};
  adam.step();
  const double mh = 0.1 * 2 / (1 - 0.81), vh = 0.001 * 4 / (1 - 0.998001);
  REQUIRE(p.value.at(1, 0) == Approx(0.95 * 0.95 - 0.1 * mh / std::sqrt(vh)).epsilon(1e-5));
}

// Moves of row 0 after `warmup` steps of gradient 0.1 and then one burst of `burst` followed by
// `quiet` steps of zero gradient (the row listed every step, as DCT-DP's error feedback leaves it).
double displacement_after_burst(uint32_t freeze, size_t warmup, float burst, size_t quiet) {
  Parameter p{"w", Tensor(1, 1), {}};
  optim::AdamOptimizer adam(optim::Adam{.lr = 0.01f, .freeze_second_moment = freeze}, {&p});
  p.grad.rows = {0};
  p.grad.values = Tensor(1, 1);
  for (size_t k = 0; k < warmup; ++k) {
    p.grad.values.fill(0.1f);
    adam.step();
  }
  const double before = p.value.at(0, 0);
  p.grad.values.fill(burst);
  adam.step();
  p.grad.values.fill(0.0f);
  for (size_t k = 0; k < quiet; ++k) adam.step();
  return p.value.at(0, 0) - before;
}

TEST_CASE("Adam with a frozen second moment: v stops after N updates, later steps are linear in the gradient") {
  Parameter p{"w", Tensor(1, 2), {}};
  optim::AdamOptimizer adam(optim::Adam{.lr = 0.1f, .freeze_second_moment = 2}, {&p});
  p.grad.rows = {0};
  p.grad.values = Tensor(1, 2);
  const float g[3][2] = {{0.5f, -1.0f}, {0.25f, 2.0f}, {30.0f, -0.5f}};
  double m[2] = {0, 0}, v[2] = {0, 0}, w[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    for (int c = 0; c < 2; ++c) p.grad.values.at(0, c) = g[t - 1][c];
    adam.step();
    for (int c = 0; c < 2; ++c) {
      m[c] = 0.9 * m[c] + 0.1 * g[t - 1][c];
      // Frozen from the 3rd update on, but raised where the corrected v is below 0.001 g^2
      // (column 0's 30).
      const double g2 = double(g[t - 1][c]) * g[t - 1][c], c2 = 1 / (1 - std::pow(0.999, 2));
      v[c] = t <= 2 ? 0.999 * v[c] + 0.001 * g2 : std::max(v[c], 0.001 * g2 / c2);
      const double m_hat = m[c] / (1 - std::pow(0.9, t)), v_hat = v[c] / (1 - std::pow(0.999, std::min(t, 2)));
      w[c] -= 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8);
      REQUIRE(p.value.at(0, c) == Approx(w[c]).epsilon(1e-5));
    }
  }
  REQUIRE(adam.state(0).v.at(0, 1) == Approx(v[1]).epsilon(1e-4));  // float: 1 - 0.999f is not 0.001
  REQUIRE(v[1] > 0.001 * 0.25 * (1 - 0.999 * 0.999));                // column 1 kept its frozen v
  REQUIRE(adam.state(0).v.at(0, 0) == Approx(0.001 * 900.0 * (1 - 0.999 * 0.999)).epsilon(1e-4));  // column 0: raised
  // A burst of 8 steps' gradient after the freeze moves the weight 8 times as far as one step's
  // (the moves of a linear update; the warm-up's momentum, the same in both, subtracted);
  // unfrozen, Adam's renormalization shrinks it.
  const auto ratio = [](uint32_t freeze) {
    const double base = displacement_after_burst(freeze, 50, 0.0f, 200);
    return (displacement_after_burst(freeze, 50, 0.8f, 200) - base) /
           (displacement_after_burst(freeze, 50, 0.1f, 200) - base);
  };
  REQUIRE(ratio(50) == Approx(8.0).epsilon(1e-3));
  REQUIRE(ratio(0) < 4.0);
  REQUIRE_THROWS_WITH((optim::Adam{.updates = optim::SparseUpdates::catchup, .freeze_second_moment = 5}.validate()),
                      Catch::Contains("lazy"));
  REQUIRE_THROWS_WITH((optim::Options{.method = optim::Method::sgd, .freeze_second_moment = 5}.validate()),
                      Catch::Contains("Adam"));
}

TEST_CASE("Adagrad by hand: accumulated squares, lazy rows untouched, catch-up owes weight decay only") {
  // Rows 0..2 of one column from w = 1, acc = 0.1: row 0 has gradients 2, -1, 0.5 at steps 1-3,
  // row 1 only 3 at step 3, row 2 none. Dense Adagrad with lr 0.1 and decoupled decay wd, by hand.
  const double lr = 0.1, acc0 = 0.1;
  const std::vector<std::vector<double>> grads{{2.0, -1.0, 0.5}, {0.0, 0.0, 3.0}, {0.0, 0.0, 0.0}};
  const auto dense = [&](double wd, bool skip_untouched) {
    std::vector<double> w(3, 1.0), acc(3, acc0);
    for (size_t k = 0; k < 3; ++k)
      for (size_t r = 0; r < 3; ++r) {
        const double g = grads[r][k];
        if (skip_untouched && g == 0.0) continue;  // lazy: a row without a gradient is not visited
        w[r] *= 1.0 - lr * wd;
        acc[r] += g * g;
        w[r] -= lr * g / (std::sqrt(acc[r]) + 1e-10);
      }
    return std::pair{w, acc};
  };
  // Row 0 spelled out: acc 4.1, 5.1, 5.35.
  const double row0 = 1.0 - 0.1 * 2 / std::sqrt(4.1) + 0.1 / std::sqrt(5.1) - 0.05 / std::sqrt(5.35);
  REQUIRE(dense(0.0, false).first[0] == Approx(row0).epsilon(1e-9));  // eps 1e-10 aside
  for (const double wd : {0.0, 0.5})
    for (const auto updates : {optim::SparseUpdates::lazy, optim::SparseUpdates::catchup}) {
      INFO("weight decay " << wd << ", " << optim::to_string(updates));
      Parameter p{"w", Tensor(3, 1), {}};
      p.value.fill(1.0f);
      optim::AdagradOptimizer adagrad(
          optim::Adagrad{.lr = 0.1f, .initial_accumulator = 0.1f, .weight_decay = float(wd), .updates = updates},
          {&p});
      REQUIRE(adagrad.state(0).m.at(2, 0) == 0.1f);
      REQUIRE(adagrad.state(0).v.empty());
      for (size_t k = 0; k < 3; ++k) {
        p.grad.rows.clear();
        std::vector<float> g;
        for (uint32_t r = 0; r < 3; ++r)
          if (grads[r][k] != 0.0) {
            p.grad.rows.push_back(r);
            g.push_back(float(grads[r][k]));
          }
        p.grad.values = Tensor(g.size(), 1);
        std::copy(g.begin(), g.end(), p.grad.values.data());
        adagrad.step();
      }
      adagrad.catch_up();
      const bool catchup = updates == optim::SparseUpdates::catchup;
      const auto [w, acc] = dense(wd, !catchup);
      for (size_t r = 0; r < 3; ++r) {
        CHECK(p.value.at(r, 0) == Approx(w[r]).epsilon(1e-6));
        CHECK(adagrad.state(0).m.at(r, 0) == Approx(acc[r]).epsilon(1e-6));
      }
      // Lazy: row 2 never moved; catch-up: it decayed by (1 - lr wd)^3 and nothing else.
      CHECK(p.value.at(2, 0) == Approx(catchup ? std::pow(1.0 - lr * wd, 3) : 1.0).epsilon(1e-6));
      // Without decay there is nothing to owe: lazy and catch-up are both dense Adagrad.
      if (wd == 0.0) CHECK(p.value.at(1, 0) == Approx(dense(0.0, false).first[1]).epsilon(1e-6));
    }
}

TEST_CASE("row-wise Adagrad: one f32 accumulator per row of a row-sparse parameter, per-element elsewhere") {
  const optim::Options o{.method = optim::Method::rowwise_adagrad, .lr = 0.1f, .initial_accumulator = 0.1f};
  // A row-sparse table (f32 and bf16 weights) and a dense parameter (a bias) in one optimizer.
  for (const Dtype dtype : {Dtype::f32, Dtype::bf16}) {
    INFO(dtype_name(dtype));
    Parameter table{"table", Tensor(4, 3, dtype), {}}, bias{"bias", Tensor(1, 3), {}};
    table.row_sparse = true;
    auto opt = optim::Optimizer::create(o, {&table, &bias});
    CHECK(opt->state(0).m.rows() == 4);
    CHECK(opt->state(0).m.cols() == 1);
    CHECK(opt->state(0).m.dtype() == Dtype::f32);
    CHECK(opt->state(0).m.at(3, 0) == 0.1f);
    CHECK(opt->state(1).m.cols() == 3);  // the bias: per-element Adagrad
    // Row 2 gets gradient (1, 2, 3): acc = 0.1 + 14/3, every entry moves by 0.1 / sqrt(acc) per unit.
    gradient_123(table, 2);
    gradient_123(bias, 0);
    opt->step();
    const double acc = 0.1 + 14.0 / 3.0, step = 0.1 / std::sqrt(acc);
    CHECK(opt->state(0).m.at(2, 0) == Approx(acc).epsilon(1e-6));
    CHECK(opt->state(0).m.at(1, 0) == 0.1f);  // untouched rows keep theirs
    const double tolerance = dtype == Dtype::bf16 ? 1e-2 : 1e-6;  // bf16 weights: 8 bits of mantissa
    for (size_t c = 0; c < 3; ++c) {
      CHECK(table.value.value_at(2, c) == Approx(-step * (c + 1)).epsilon(tolerance));
      CHECK(table.value.value_at(1, c) == 0.0f);
      // The bias per element: entry c's own accumulator 0.1 + (c + 1)^2.
      CHECK(bias.value.at(0, c) == Approx(-0.1 * (c + 1) / std::sqrt(0.1 + (c + 1.0) * (c + 1.0))).epsilon(1e-6));
    }
    // Bytes: the table's state is 4 bytes a row.
    CHECK(opt->moment_bytes() == 4 * 4 + 3 * 4);
  }
  // A parameter that is not row-sparse trains as per-element Adagrad, to the bit.
  const optim::Options adagrad{.method = optim::Method::adagrad, .lr = 0.05f};
  optim::Options rowwise = adagrad;
  rowwise.method = optim::Method::rowwise_adagrad;
  CHECK(max_difference(train(rowwise, {}, false, 50, false), train(adagrad, {}, false, 50, false)) == 0.0);
  // A row-sparse parameter sliced by columns (each rank has part of every row) keeps per-element
  // Adagrad's state, and the optimizer names it.
  Parameter sliced{"sparse_dense.weight", Tensor(4, 2), {}, 1, 2, 4, 4};
  sliced.row_sparse = true;
  const auto part = optim::Optimizer::create(o, {&sliced});
  CHECK(part->state(0).m.cols() == 2);
  CHECK(part->row_wise_fallbacks() == std::vector<std::string>{"sparse_dense.weight"});
  sliced.value = Tensor(4, 4);  // the whole row here (one rank): row-wise
  sliced.offset = 0;
  const auto whole = optim::Optimizer::create(o, {&sliced});
  CHECK(whole->state(0).m.cols() == 1);
  CHECK(whole->row_wise_fallbacks().empty());
}

TEST_CASE("row-wise Adam: one f32 second moment per row of a row-sparse parameter, m per element or none") {
  for (const bool momentum : {true, false})
    for (const Dtype dtype : {Dtype::f32, Dtype::bf16}) {
      INFO((momentum ? "momentum " : "no momentum ") << dtype_name(dtype));
      const optim::Options o = optim::RowwiseAdam{.lr = 0.1f, .momentum = momentum};
      Parameter table{"table", Tensor(4, 3, dtype), {}}, bias{"bias", Tensor(1, 3), {}};
      table.row_sparse = true;
      auto opt = optim::Optimizer::create(o, {&table, &bias});
      REQUIRE(dynamic_cast<optim::AdamOptimizer*>(opt.get()) != nullptr);
      CHECK(opt->state(0).v.rows() == 4);
      CHECK(opt->state(0).v.cols() == 1);
      CHECK(opt->state(0).v.dtype() == Dtype::f32);
      CHECK(opt->state(0).m.empty() == !momentum);
      if (momentum) CHECK((opt->state(0).m.cols() == 3 && opt->state(0).m.dtype() == dtype));
      CHECK(opt->state(1).v.cols() == 3);  // the bias: Adam per element
      // Row 2 gets gradient (1, 2, 3): v = 0.001 * 14/3; the first step, bias-corrected, is
      // lr * g / sqrt(14/3) (+ eps) with or without momentum (m-hat is g on the first step).
      gradient_123(table, 2);
      gradient_123(bias, 0);
      opt->step();
      CHECK(opt->state(0).v.at(2, 0) == Approx(0.001 * 14.0 / 3.0).epsilon(1e-4));  // 1 - beta2 in f32
      CHECK(opt->state(0).v.at(1, 0) == 0.0f);
      const double tolerance = dtype == Dtype::bf16 ? 1e-2 : 1e-5;
      for (size_t c = 0; c < 3; ++c) {
        CHECK(table.value.value_at(2, c) == Approx(-0.1 * (c + 1) / std::sqrt(14.0 / 3.0)).epsilon(tolerance));
        CHECK(table.value.value_at(1, c) == 0.0f);
        CHECK(bias.value.at(0, c) == Approx(-0.1).epsilon(1e-5));  // Adam's first step: lr * sign(g)
      }
      // Bytes: the table's state is 4 bytes a row, plus m in the weights' precision with momentum.
      CHECK(opt->moment_bytes() == 4 * 4 + (momentum ? 12 * dtype_bytes(dtype) : 0) + 2 * 3 * 4);
    }
  // A parameter that is not row-sparse trains as Adam, to the bit.
  const optim::Options adam = optim::Adam{.lr = 0.01f};
  CHECK(max_difference(train(optim::RowwiseAdam{.lr = 0.01f}, {}, false, 50, false), train(adam, {}, false, 50, false)) ==
        0.0);
  // A column-sliced parameter keeps Adam's two per-element moments (with or without momentum); a
  // frozen second moment is plain Adam's.
  Parameter sliced{"sparse_dense.weight", Tensor(4, 2), {}, 1, 2, 4, 4};
  sliced.row_sparse = true;
  const auto part = optim::Optimizer::create(optim::RowwiseAdam{.momentum = false}, {&sliced});
  CHECK((part->state(0).m.cols() == 2 && part->state(0).v.cols() == 2));
  CHECK(part->row_wise_fallbacks() == std::vector<std::string>{"sparse_dense.weight"});
  // rowwise_input off (--rowwise-layers output): an input table keeps Adam's per-element moments,
  // an output table its row-wise second moment.
  Parameter input{"input", Tensor(4, 3), {}}, output{"output", Tensor(5, 3), {}};
  input.row_sparse = input.input_rows = output.row_sparse = true;
  optim::Options outputs_only = optim::RowwiseAdam{};
  outputs_only.rowwise_input = false;
  const auto mixed = optim::Optimizer::create(outputs_only, {&input, &output});
  CHECK((mixed->state(0).v.cols() == 3 && mixed->state(1).v.cols() == 1 && mixed->row_wise_fallbacks().empty()));
  optim::Options frozen = optim::RowwiseAdam{};
  frozen.freeze_second_moment = 10;
  CHECK_THROWS_WITH(frozen.validate(), Catch::Contains("freeze_second_moment"));
}

TEST_CASE("--update-threshold: small gradients wait in a residual and are never lost") {
  // Plain SGD is linear in the gradients: deferring a row's gradients and applying their sum later
  // ends at the same weights (to float rounding) when the gradients do not depend on the weights.
  const auto run = [](float threshold, optim::Method method, uint64_t* deferred, bool quiet_row0 = true) {
    optim::Options o = optim::Sgd{.lr = 0.1f, .momentum = 0.0f};
    o.method = method;
    if (method == optim::Method::rowwise_adam) o.lr = 0.01f;
    o.update_threshold = threshold;
    Parameter p{"w", initial(), {}};
    p.row_sparse = true;
    auto opt = optim::Optimizer::create(o, {&p});
    for (size_t k = 0; k < 200; ++k) {
      p.grad.clear();
      for (uint32_t r = 0; r < kRows; ++r)
        if (touched(r, k)) p.grad.rows.push_back(r);
      p.grad.values = Tensor(p.grad.rows.size(), kCols);
      for (size_t j = 0; j < p.grad.rows.size(); ++j)
        for (size_t c = 0; c < kCols; ++c) {
          // Row 0's gradient is large every 10th step and ~1e-3 of that in between.
          const float scale = quiet_row0 && p.grad.rows[j] == 0 && k % 10 != 0 ? 1e-3f : 1.0f;
          p.grad.values.at(j, c) = scale * gradient(p.grad.rows[j], k, c);
        }
      opt->step();
    }
    if (deferred != nullptr) *deferred = opt->deferred_rows();
    opt->apply_deferred();
    return p.value;
  };
  uint64_t deferred = 0;
  const Tensor off = run(0.0f, optim::Method::sgd, nullptr), held = run(0.5f, optim::Method::sgd, &deferred);
  CHECK(deferred > 100);  // row 0's small steps (and some others') waited
  CHECK(max_difference(held, off) < 1e-6);
  // Threshold 0 is the optimizer without the rule, to the bit (row-wise Adam here, where a deferral
  // would change the trajectory).
  optim::Options plain = optim::RowwiseAdam{.lr = 0.01f};
  CHECK(max_difference(run(0.0f, optim::Method::rowwise_adam, nullptr, false), train(plain, {}, false, 200)) == 0.0);
  // Adam-type steps are not linear: held-back rows end elsewhere, but every row the rule saw moved.
  uint64_t adam_deferred = 0;
  const Tensor adam_held = run(0.5f, optim::Method::rowwise_adam, &adam_deferred);
  CHECK(adam_deferred > 100);
  CHECK(max_difference(adam_held, run(0.0f, optim::Method::rowwise_adam, nullptr)) > 1e-4);

  // By hand: row 0 gets (1,1,1) (its first: applied; scale 1), then (0.1,0.1,0.1) (RMS 0.1 < 0.5:
  // held), then (0.3,...) (sum 0.4 < 0.5 * 0.91: held), then (0.2,...) (sum 0.6: applied with 0.6).
  optim::Options o = optim::Sgd{.lr = 1.0f, .momentum = 0.0f};
  o.update_threshold = 0.5f;
  Parameter p{"w", Tensor(2, 3), {}};
  p.row_sparse = true;
  auto opt = optim::Optimizer::create(o, {&p});
  std::vector<float> moves;
  for (const float g : {1.0f, 0.1f, 0.3f, 0.2f}) {
    p.grad.clear();
    p.grad.rows = {0};
    p.grad.values = Tensor(1, 3);
    p.grad.values.fill(g);
    const float before = p.value.at(0, 0);
    opt->step();
    moves.push_back(before - p.value.at(0, 0));
    CHECK(p.grad.rows.size() == (g == 1.0f || g == 0.2f ? 1u : 0u));  // the rows the step moved
  }
  CHECK(moves[0] == Approx(1.0f));
  CHECK(moves[1] == 0.0f);
  CHECK(moves[2] == 0.0f);
  CHECK(moves[3] == Approx(0.6f));
  CHECK(opt->deferred_rows() == 2);
  CHECK(opt->threshold_rows() == 4);
  // A held residual is applied by apply_deferred, which lists the rows it moved.
  p.grad.clear();
  p.grad.rows = {0};
  p.grad.values = Tensor(1, 3);
  p.grad.values.fill(0.01f);
  opt->step();
  CHECK(p.grad.rows.empty());
  const float before = p.value.at(0, 0);
  opt->apply_deferred();
  CHECK(p.grad.rows == std::vector<uint32_t>{0});
  CHECK(before - p.value.at(0, 0) == Approx(0.01f));
  CHECK(opt->steps() == 5);  // not a training step
  // Combinations it refuses.
  optim::Options catchup = o;
  catchup.updates = optim::SparseUpdates::catchup;
  CHECK_THROWS_WITH(catchup.validate(), Catch::Contains("--update-threshold needs --sparse-updates lazy"));
  o.update_threshold = -1;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("update threshold"));
}

TEST_CASE("learning-rate schedules: warm-up, linear and cosine factors") {
  using optim::ScheduleKind;
  const optim::LrSchedule linear{ScheduleKind::linear, 4, 12}, cosine{ScheduleKind::cosine, 4, 12},
      warm{ScheduleKind::constant, 2, 0};
  REQUIRE(linear.factor(0) == 0.25);
  REQUIRE(linear.factor(3) == 1.0);
  REQUIRE(linear.factor(4) == 1.0);
  REQUIRE(linear.factor(8) == 0.5);
  REQUIRE(linear.factor(11) == 0.125);  // the last step still moves
  REQUIRE(linear.factor(40) == 0.0);
  REQUIRE(cosine.factor(8) == Approx(0.5));
  REQUIRE(cosine.factor(4) == 1.0);
  REQUIRE(cosine.factor(12) == Approx(0.0).margin(1e-12));
  REQUIRE(warm.factor(0) == 0.5);
  REQUIRE(warm.factor(1000) == 1.0);
  REQUIRE(optim::LrSchedule{}.factor(7) == 1.0);
  REQUIRE_THROWS_WITH((optim::LrSchedule{ScheduleKind::cosine, 0, 0}.validate()), Catch::Contains("total_steps"));
  REQUIRE_THROWS_WITH((optim::LrSchedule{ScheduleKind::linear, 12, 12}.validate()), Catch::Contains("warmup_steps"));
  REQUIRE_THROWS_WITH(optim::schedule_kind_from_string("step"), Catch::Contains("constant, linear or cosine"));
}

TEST_CASE("optimizer options: validation and shorthands") {
  REQUIRE_THROWS_WITH(optim::Adam{.lr = -1}.validate(), Catch::Contains("lr"));
  REQUIRE_THROWS_WITH(optim::Sgd{.momentum = 1.0f}.validate(), Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH((optim::Options{.lr = 0.1f, .weight_decay = -1}.validate()), Catch::Contains("weight decay"));
  const optim::Options sgd = optim::Sgd{.lr = 0.2f, .momentum = 0.5f};
  REQUIRE(sgd.method == optim::Method::sgd);
  REQUIRE(sgd.momentum == 0.5f);
  const optim::Options adam = optim::Adam{.lr = 0.2f, .updates = optim::SparseUpdates::lazy};
  REQUIRE(adam.method == optim::Method::adam);
  REQUIRE(adam.updates == optim::SparseUpdates::lazy);
  Parameter p{"w", Tensor(2, 2), {}};
  REQUIRE(optim::Optimizer::create(sgd, {&p})->state(0).v.empty());
  REQUIRE(optim::Optimizer::create(adam, {&p})->state(0).v.rows() == 2);
  const optim::Options adagrad = optim::Adagrad{};
  REQUIRE(adagrad.method == optim::Method::adagrad);
  REQUIRE(adagrad.lr == 0.01f);  // PyTorch's default
  REQUIRE(adagrad.initial_accumulator == 0.0f);
  REQUIRE(adagrad.adagrad_eps == 1e-10f);
  const auto made = optim::Optimizer::create(optim::Adagrad{.initial_accumulator = 0.25f}, {&p});
  REQUIRE(dynamic_cast<optim::AdagradOptimizer*>(made.get()) != nullptr);
  REQUIRE(made->state(0).v.empty());
  REQUIRE(made->state(0).m.at(1, 1) == 0.25f);
  REQUIRE_THROWS_WITH(optim::Adagrad{.initial_accumulator = -1}.validate(), Catch::Contains("initial accumulator"));
  REQUIRE_THROWS_WITH(optim::Adagrad{.eps = 0}.validate(), Catch::Contains("eps"));
  for (const auto method :
       {optim::Method::adam, optim::Method::sgd, optim::Method::adagrad, optim::Method::rowwise_adagrad,
        optim::Method::rowwise_adam})
    REQUIRE(optim::method_from_string(optim::to_string(method)) == method);
  REQUIRE_THROWS_WITH(optim::method_from_string("rmsprop"),
                      Catch::Contains("adam, sgd, adagrad, rowwise-adagrad or rowwise-adam"));
}

TEST_CASE("a step in parts (begin, each parameter in any order, end) is step() bit for bit") {
  for (const optim::Method method : {optim::Method::adam, optim::Method::sgd, optim::Method::adagrad}) {
    for (const auto updates : {optim::SparseUpdates::lazy, optim::SparseUpdates::catchup}) {
      optim::Options o;
      o.method = method;
      o.updates = updates;
      o.weight_decay = 0.01f;
      Parameter a1{"a", initial(), {}}, b1{"b", initial(), {}}, a2{"a", initial(), {}}, b2{"b", initial(), {}};
      auto whole = optim::Optimizer::create(o, {&a1, &b1});
      auto parts = optim::Optimizer::create(o, {&a2, &b2});
      for (size_t k = 0; k < 30; ++k) {
        for (Parameter* p : {&a1, &b1, &a2, &b2}) {
          p->grad.rows.clear();
          const size_t shift = p->name == "a" ? 0 : 2;
          for (uint32_t r = 0; r < kRows; ++r)
            if (touched(r, k + shift)) p->grad.rows.push_back(r);
          p->grad.values = Tensor(p->grad.rows.size(), kCols);
          for (size_t j = 0; j < p->grad.rows.size(); ++j)
            for (size_t c = 0; c < kCols; ++c) p->grad.values.at(j, c) = gradient(p->grad.rows[j], k + shift, c);
        }
        whole->step();
        parts->begin_step();
        parts->step_parameter(parts->index_of(&b2));  // the other order
        parts->step_parameter(parts->index_of(&a2));
        parts->end_step();
      }
      REQUIRE(parts->steps() == whole->steps());
      REQUIRE(max_difference(a1.value, a2.value) == 0.0);
      REQUIRE(max_difference(b1.value, b2.value) == 0.0);
      REQUIRE(parts->index_of(&a1) == parts->size());
      REQUIRE_THROWS(parts->step_parameter(0));  // outside a step
      parts->begin_step();
      REQUIRE_THROWS(parts->begin_step());  // one step at a time
      parts->step_parameter(0);
      parts->step_parameter(1);
      parts->end_step();
    }
  }
}
