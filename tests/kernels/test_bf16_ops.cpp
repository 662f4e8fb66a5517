// bf16 storage (`--precision bf16`, core/tensor.h): conversions, and every registered backend's ops
// on bf16 weights (the CPU's; the CUDA backend's where a GPU is visible). Widening is exact, so an op
// on bf16 weights must give the bits the same backend's op gives on an f32 copy of the widened
// weights; optimizer updates are stored with stochastic rounding that is unbiased, deterministic and
// independent of threads, and a device backend's bf16 updates are the CPU's to within a bf16 step.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "kernels/bf16_dot.h"
#include "kernels/vector_ops.h"
#include "tests/kernels/bf16_pair.h"

using namespace frugal;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

using Pair = testing::Bf16Pair;
using testing::random_bf16_pair;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && a.dtype() == b.dtype() &&
         std::memcmp(a.dtype() == Dtype::f32 ? static_cast<const void*>(a.data()) : a.bf16_data(),
                     b.dtype() == Dtype::f32 ? static_cast<const void*>(b.data()) : b.bf16_data(), a.bytes()) == 0;
}

}  // namespace

TEST_CASE("bf16: widening is exact, narrowing rounds to nearest even, NaN and infinities survive") {
  REQUIRE(bf16_to_f32(f32_to_bf16(1.0f)) == 1.0f);
  REQUIRE(bf16_to_f32(f32_to_bf16(-2.5f)) == -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1).
  REQUIRE(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-8f)) == 1.0f);
  REQUIRE(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  REQUIRE(bf16_to_f32(f32_to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  REQUIRE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
  REQUIRE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the dropped half stays a NaN (not an infinity).
  REQUIRE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  REQUIRE(std::isnan(bf16_to_f32(f32_to_bf16_stochastic(from_bits(0x7f800001u), 0xffff))));
  // The largest bf16 value is kept; beyond it, rounding up is to infinity, as round to nearest does;
  // infinities stay infinite.
  const float largest = from_bits(0x7f7f0000u);
  REQUIRE(bf16_to_f32(f32_to_bf16_stochastic(largest, 0xffff)) == largest);
  REQUIRE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::max()))));
  REQUIRE(bf16_to_f32(f32_to_bf16_stochastic(-std::numeric_limits<float>::infinity(), 0xffff)) ==
          -std::numeric_limits<float>::infinity());
  // A value that bf16 holds exactly is kept, whatever the random bits.
  for (const uint32_t r : {0u, 1u, 0x8000u, 0xffffu}) REQUIRE(bf16_to_f32(f32_to_bf16_stochastic(0.75f, r)) == 0.75f);

  Tensor t(3, 5, Dtype::bf16);
  REQUIRE(t.bytes() == 30);
  t.set_value(1, 2, 0.3f);
  REQUIRE(t.value_at(1, 2) == bf16_to_f32(f32_to_bf16(0.3f)));
  REQUIRE_THROWS_WITH(t.data(), Catch::Contains("3x5 bf16 tensor was used as f32"));
  Tensor copy;
  copy.assign(t);  // an f32 tensor takes the widened values
  REQUIRE(copy.dtype() == Dtype::f32);
  REQUIRE(copy.at(1, 2) == t.value_at(1, 2));
  REQUIRE_THROWS_WITH(dtype_from_string("fp8"), Catch::Contains("unknown precision 'fp8'"));
}

TEST_CASE("bf16: stochastic rounding is unbiased, keyed and thread-independent in its bits") {
  // 1 + 2^-10 lies a quarter of the way from 1 to the next bf16 value: over many keys it rounds up
  // about a quarter of the time, so the mean is the value itself.
  const float x = 1.0f + 0x1p-10f;
  std::vector<float> in(4096, x);
  std::vector<uint16_t> out(in.size()), again(in.size());
  double sum = 0;
  for (uint32_t key = 0; key < 64; ++key) {
    kernels::narrow_bf16_stochastic(in.data(), out.data(), in.size(), key, 0);
    kernels::narrow_bf16_stochastic(in.data(), again.data(), in.size(), key, 0);
    REQUIRE(out == again);  // the key and the column decide
    for (const uint16_t h : out) {
      const float v = bf16_to_f32(h);
      REQUIRE((v == 1.0f || v == 1.0f + 0x1p-7f));
      sum += v;
    }
  }
  const double mean = sum / (64.0 * in.size());
  REQUIRE(mean == Approx(x).epsilon(2e-5));
  // A column's bits depend on its global column, not on where a slice starts.
  std::vector<uint16_t> whole(64), tail(32);
  kernels::narrow_bf16_stochastic(in.data(), whole.data(), 64, 7, 0);
  kernels::narrow_bf16_stochastic(in.data(), tail.data(), 32, 7, 32);
  REQUIRE(std::equal(tail.begin(), tail.end(), whole.begin() + 32));
}

// The CPU's with its bf16 dot products off (kernels/bf16_dot.h; on, they are within a bound of
// these: tests/kernels/test_bf16_dot.cpp).
TEST_CASE("bf16: every backend's ops on bf16 weights give the bits of its ops on the widened weights") {
  struct Restore {
    kernels::Bf16Dot mode = kernels::bf16_dot();
    ~Restore() { kernels::set_bf16_dot(mode); }
  } restore;
  kernels::set_bf16_dot(kernels::Bf16Dot::off);
  std::vector<std::pair<Backend*, size_t>> cases;  // (backend, width)
  for (Backend* backend : backends())
    for (const size_t d : {16, 37, 128}) cases.emplace_back(backend, d);
  for (const auto& [backend, d] : cases) {
    Backend& be = *backend;
    INFO(be.name() << ", width " << d);
    const Pair w = random_bf16_pair(300, d, d);
    Tensor bias(1, d);
    for (size_t c = 0; c < d; ++c) bias.data()[c] = 0.01f * static_cast<float>(c);
    // A sparse batch over the 300 rows.
    SparseBatch x;
    Rng rng(3);
    for (int i = 0; i < 20; ++i) {
      std::vector<uint32_t> ids;
      std::vector<float> vals;
      for (int j = 0; j < 15; ++j) {
        ids.push_back(static_cast<uint32_t>(rng.below(300)));
        vals.push_back(static_cast<float>(rng.uniform(-1.0, 1.0)));
      }
      const uint32_t label = 0;
      x.add_point(ids, vals, {&label, 1});
    }
    Tensor out_half, out_wide;
    SparseFeatures features;
    features.assign(x, be);
    be.sparse_input_forward(features, w.half, bias, Act::relu, out_half);
    be.sparse_input_forward(features, w.wide, bias, Act::relu, out_wide);
    REQUIRE(same_bits(out_half, out_wide));

    // Active sets: each sample scores 40 rows of the 300 (a label matrix), with logit offsets.
    const Pair labels = random_bf16_pair(300, d, 100 + d);
    Tensor lbias(300, 1);
    ActiveSets active;
    for (size_t i = 0; i < x.size(); ++i) {
      for (int e = 0; e < 40; ++e) {
        active.ids.push_back(static_cast<uint32_t>(rng.below(300)));
        active.logit_offsets.push_back(e % 3 == 0 ? -0.5f : 0.0f);
      }
      active.offsets.push_back(active.ids.size());
    }
    ActiveTensors sets;
    sets.assign(active, be);
    Tensor logits_half, logits_wide;
    be.active_logits(out_wide, sets, labels.half, lbias, logits_half);
    be.active_logits(out_wide, sets, labels.wide, lbias, logits_wide);
    REQUIRE(same_bits(logits_half, logits_wide));
    Tensor grad_half, grad_wide;
    be.active_backward_input(sets, logits_wide, labels.half, grad_half);
    be.active_backward_input(sets, logits_wide, labels.wide, grad_wide);
    REQUIRE(same_bits(grad_half, grad_wide));

    // LSH codes of listed rows (a rebuild) and of every row.
    const std::vector<uint32_t> rows{5, 0, 299, 17, 17, 150};
    const int k = 4, bin_size = 8, bin_bits = 3;
    const size_t tables = 6;
    std::vector<uint32_t> coords(tables * k * bin_size);
    for (uint32_t& c : coords) c = static_cast<uint32_t>(rng.below(d));
    const DwtaSpec dwta{.coords = coords, .k = k, .bin_size = bin_size, .bin_bits = bin_bits, .bucket_bits = 12,
                        .max_bucket_bits = 12, .tables = tables, .seed = 5};
    Tensor planes(tables * 8, d);
    for (size_t i = 0; i < planes.size(); ++i) planes.data()[i] = static_cast<float>(rng.normal());
    const SimHashSpec simhash{.planes = &planes, .k = 8, .tables = tables};
    for (const bool listed : {true, false}) {
      const std::span<const uint32_t> which = listed ? std::span<const uint32_t>(rows) : std::span<const uint32_t>();
      const size_t n = listed ? rows.size() : labels.half.rows();
      Tensor a(0, 0, Dtype::u32), b(0, 0, Dtype::u32);
      const auto same = [&] {
        REQUIRE(a.size() == n * tables);
        REQUIRE(std::equal(a.u32().begin(), a.u32().end(), b.u32().begin(), b.u32().end()));
      };
      be.dwta_codes(dwta, labels.half, which, a);
      be.dwta_codes(dwta, labels.wide, which, b);
      same();
      be.simhash_codes(simhash, labels.half, which, a);
      be.simhash_codes(simhash, labels.wide, which, b);
      same();
    }
  }
}

namespace {

// An Adam update of `rows` of a bf16 state (w, m, v), with or without the per-row path that
// catch-up plans take (plans of null pointers: no row is behind).
struct AdamCase {
  Tensor w, m, v, grad;
  std::vector<uint32_t> rows, counts;
  Tensor corrections;  // row t: correction1(t), correction2(t)
};
AdamCase adam_case(Dtype dtype) {
  AdamCase a;
  const Pair w = random_bf16_pair(500, 40, 1, 0.1f);
  a.w = dtype == Dtype::bf16 ? w.half : w.wide;
  a.m = Tensor(500, 40, dtype);
  a.v = Tensor(500, 40, dtype);
  for (uint32_t r = 0; r < 500; r += 3) a.rows.push_back(r);
  a.grad = Tensor(a.rows.size(), 40);
  Rng rng(2);
  for (size_t i = 0; i < a.grad.size(); ++i) a.grad.data()[i] = 0.01f * static_cast<float>(rng.normal());
  a.counts.assign(a.rows.size(), 1);
  a.corrections = Tensor(2, 2);
  a.corrections.at(0, 0) = 1.0f;
  a.corrections.at(0, 1) = 1.0f;
  a.corrections.at(1, 0) = 10.0f;
  a.corrections.at(1, 1) = 1000.0f;
  return a;
}
RowUpdate adam_update(AdamCase& a, std::span<const CatchUpPlan* const> plans) {
  RowUpdate u;
  u.w = &a.w;
  u.m = &a.m;
  u.v = &a.v;
  u.rows = a.rows;
  u.grad = &a.grad;
  u.plans = plans;
  u.counts = a.counts;
  u.corrections = &a.corrections;
  u.lr = 1e-3f;
  u.beta1 = 0.9f;
  u.beta2 = 0.999f;
  u.eps = 1e-8f;
  u.round_seed = 77;
  u.row_base = 1000;
  return u;
}

}  // namespace

// A device backend's bf16 updates against the CPU's: the same f32 arithmetic and the same rounding
// bits, so equal but where the f32 value before rounding differs in its last bits (then one bf16
// step apart at most). Adam with a catch-up plan, SGD and Adagrad, 3 steps each.
TEST_CASE("bf16: every other backend's optimizer rows on bf16 state are the CPU's to within a bf16 step") {
  Backend& cpu = *find_backend("cpu");
  size_t compared = 0;
  for (Backend* other : backends()) {
    if (other == &cpu) continue;
    for (const Op op : {Op::adam_rows, Op::sgd_rows, Op::adagrad_rows}) {
      INFO(other->name() << " " << op_name(op));
      AdamCase a = adam_case(Dtype::bf16), b = adam_case(Dtype::bf16);
      const CatchUpPlan plan{.decay = 0.999f, .move = 0.01f, .m_decay = 0.9f, .v_decay = 0.99f};
      const float terms[2] = {1e-3f, 1.0f};
      CatchUpPlan adam_plan = plan;
      adam_plan.terms = terms;
      adam_plan.terms_count = 1;
      std::vector<const CatchUpPlan*> plans(a.rows.size(), nullptr);
      for (size_t j = 0; j < plans.size(); j += 4) plans[j] = op == Op::adam_rows ? &adam_plan : &plan;
      for (Tensor* t : {&b.w, &b.m, &b.v, &b.grad, &b.corrections}) place_on(*t, other);  // the other backend's memory
      for (int step = 0; step < 3; ++step)
        for (auto [be, c] : {std::pair{&cpu, &a}, std::pair{other, &b}}) {
          RowUpdate u = adam_update(*c, step == 0 ? std::span<const CatchUpPlan* const>(plans)
                                                  : std::span<const CatchUpPlan* const>());
          u.round_seed = 77 + static_cast<uint64_t>(step);
          if (op == Op::adam_rows) {
            be->adam_rows(u);
          } else {
            u.v = nullptr;
            u.counts = {};
            u.momentum = 0.9f;
            op == Op::sgd_rows ? be->sgd_rows(u) : be->adagrad_rows(u);
          }
        }
      size_t identical = 0, total = 0;
      for (Tensor* t : {&b.w, &b.m, &b.v}) *t = to_host(*t);
      for (auto [x, y] : {std::pair{&a.w, &b.w}, std::pair{&a.m, &b.m}, std::pair{&a.v, &b.v}})
        for (size_t r = 0; r < x->rows(); ++r)
          for (size_t col = 0; col < x->cols(); ++col) {
            const float want = x->value_at(r, col), got = y->value_at(r, col);
            ++total;
            if (std::memcmp(&want, &got, sizeof want) == 0) ++identical;
            REQUIRE(std::abs(got - want) <= 0x1p-7f * std::abs(want) + 1e-30f);
          }
      std::printf("bf16 %s vs cpu %s: %zu of %zu elements identical\n", other->name().c_str(),
                  std::string(op_name(op)).c_str(), identical, total);
      ++compared;
    }
  }
  if (compared == 0) std::printf("bf16 optimizer rows: no backend but cpu registered, nothing to compare\n");
}

TEST_CASE("bf16: Adam rows: the fused pass equals the per-row path, on any thread count, near f32") {
  Backend& be = *find_backend("cpu");
  const int threads = be.num_threads();
  AdamCase fused = adam_case(Dtype::bf16), per_row = adam_case(Dtype::bf16), one_thread = adam_case(Dtype::bf16),
           f32 = adam_case(Dtype::f32);
  const std::vector<const CatchUpPlan*> none(per_row.rows.size(), nullptr);
  for (int step = 0; step < 3; ++step) {
    be.set_num_threads(2);
    be.adam_rows(adam_update(fused, {}));
    be.adam_rows(adam_update(per_row, none));
    be.adam_rows(adam_update(f32, {}));
    be.set_num_threads(1);
    be.adam_rows(adam_update(one_thread, {}));
  }
  be.set_num_threads(threads);
  REQUIRE(same_bits(fused.w, per_row.w));
  REQUIRE(same_bits(fused.m, per_row.m));
  REQUIRE(same_bits(fused.v, per_row.v));
  REQUIRE(same_bits(fused.w, one_thread.w));
  REQUIRE(same_bits(fused.v, one_thread.v));
  // Each weight is within a few bf16 steps of the f32 run's: three updates, each rounded once (a
  // step is 2^-8 to 2^-7 of the value), plus what the rounded moments change.
  for (const uint32_t r : fused.rows)
    for (size_t c = 0; c < 40; ++c) {
      const float want = f32.w.at(r, c), got = fused.w.value_at(r, c);
      REQUIRE(std::abs(got - want) <= 4 * 0x1p-7f * std::abs(want) + 1e-4f);  // 1% of a step (0.01)
    }
  // Rows not listed are untouched.
  REQUIRE(fused.w.value_at(1, 0) == adam_case(Dtype::bf16).w.value_at(1, 0));
  // State of mixed precision is refused.
  AdamCase mixed = adam_case(Dtype::bf16);
  mixed.v = Tensor(500, 40);
  REQUIRE_THROWS_WITH(be.adam_rows(adam_update(mixed, {})), Catch::Contains("precision differs"));
}

TEST_CASE("bf16: updates far below a bf16 step still move the weights (stochastic rounding)") {
  // Adam with a constant gradient steps by ~lr each time: lr = 1e-4 is 1/78 of a bf16 step at 1.0,
  // which round-to-nearest would drop every time. Over 1000 steps the weights must move by ~0.1.
  Backend& be = *find_backend("cpu");
  Tensor w(1, 256, Dtype::bf16), m(1, 256, Dtype::bf16), v(1, 256, Dtype::bf16), g(1, 256);
  w.fill(1.0f);
  g.fill(1.0f);
  const std::vector<uint32_t> rows{0}, counts{1};
  Tensor ones(2, 2);  // no bias correction: m and v start at the gradient's scale below
  ones.fill(1.0f);
  RowUpdate u;
  u.w = &w;
  u.m = &m;
  u.v = &v;
  u.rows = rows;
  u.grad = &g;
  u.counts = counts;
  u.corrections = &ones;
  u.lr = 1e-4f;
  u.beta1 = 0.0f;  // m = g, v = g^2: each step is lr * g / |g| = lr
  u.beta2 = 0.0f;
  u.eps = 1e-8f;
  for (uint64_t step = 0; step < 1000; ++step) {
    u.round_seed = step;
    be.adam_rows(u);
  }
  double mean = 0;
  for (size_t c = 0; c < 256; ++c) mean += w.value_at(0, c);
  mean /= 256;
  REQUIRE(mean == Approx(1.0 - 0.1).margin(0.01));
}

TEST_CASE("bf16: Adam's AVX2 row pass equals the portable loop, NaN, infinities and overflow included") {
  Rng rng(12);
  for (const size_t n : {1, 7, 8, 37, 128}) {
    std::vector<uint16_t> w(n), m(n), v(n);
    std::vector<float> g(n);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(), 0.0f, -0.0f};
    for (size_t c = 0; c < n; ++c) {
      const bool special = rng.below(5) == 0;
      w[c] = f32_to_bf16(special ? specials[rng.below(6)] : static_cast<float>(rng.normal()));
      m[c] = f32_to_bf16(0.1f * static_cast<float>(rng.normal()));
      v[c] = f32_to_bf16(special && rng.below(2) == 0 ? -1.0f : 0.01f * static_cast<float>(rng.uniform(0.0, 1.0)));
      g[c] = special && rng.below(2) == 0 ? specials[rng.below(6)] : static_cast<float>(rng.normal());
    }
    auto w2 = w, m2 = m, v2 = v;
    for (uint32_t step = 1; step <= 3; ++step) {
      kernels::adam_row_bf16(w.data(), m.data(), v.data(), g.data(), n, 0.9f, 0.999f, 1e30f, 1.5f, 1e-8f, 0.99f,
                             step * 977, 5, true);
      kernels::adam_row_bf16(w2.data(), m2.data(), v2.data(), g.data(), n, 0.9f, 0.999f, 1e30f, 1.5f, 1e-8f, 0.99f,
                             step * 977, 5, false);
    }
    INFO("n " << n);
    REQUIRE(w == w2);
    REQUIRE(m == m2);
    REQUIRE(v == v2);
  }
}
