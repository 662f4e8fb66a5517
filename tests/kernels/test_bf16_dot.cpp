// The bf16 dot-product kernels (kernels/bf16_dot.h, AVX512-BF16's vdpbf16ps) against the f32
// kernels on the widened rows, the mode that picks them, and the CPU ops that use them. What runs
// the kernels is skipped (with a warning) on a CPU without AVX512-BF16.
//
// The bound. The kernels round the f32 side (the activation a, or the coefficients alpha) to bf16
// once: a'_i = a_i (1 + d_i) with |d_i| <= 2^-9 (round to nearest into 8 significant bits). A
// product of two bf16 values is exact in f32 (8 + 8 bits), so the instruction's result differs from
// sum a'_i w_i only by the roundings of its f32 additions, as the f32 kernel's result differs from
// sum a_i w_i by its own: each at most k 2^-24 (1 + 2^-9) S for chains of k additions, S = sum
// |a_i w_i| (k <= n/16 + 4 here: 16 lanes, then 4 steps across them). So
//   |got - f32| <= 2^-9 S + 2 k 2^-24 (1 + 2^-9) S <= 2^-8 S   while k <= 2^14 (n up to ~260k),
// plus the values the instruction flushes to zero (denormal inputs and sums, each below 2^-126 of
// a product's size): |got - f32| <= 2^-8 S + 1e-6. A starting value y0 of an accumulation (the
// bias) is a term with coefficient 1, which is not rounded: its |y0| joins S.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "kernels/bf16_dot.h"
#include "kernels/vector_ops.h"
#include "tests/kernels/bf16_pair.h"
#include "tests/kernels/bf16_products.h"

using namespace frugal;
using kernels::Bf16Dot;

namespace {

// Catch2 2.13 has no SKIP: a case that needs the instruction says that it checked nothing (a
// warning in the output, never a silent pass) and returns.
bool lacks_bf16_dot() {
  if (kernels::bf16_dot_available()) return false;
  WARN("SKIP: this CPU has no AVX512-BF16, nothing checked");
  return true;
}

// Restores the process-wide mode when a case ends, however it ends.
struct ModeGuard {
  Bf16Dot saved = kernels::bf16_dot();
  ~ModeGuard() { kernels::set_bf16_dot(saved); }
};

using Rows = testing::Bf16Pair;
using testing::random_bf16_pair;

std::vector<float> random_vector(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Widths around the kernels' steps: 32 values an instruction, 256 columns a block of sums.
const std::vector<size_t> kWidths{0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 100, 128, 255, 256, 257, 300, 600};

}  // namespace

TEST_CASE("bf16 dot: the mode: auto by default, on refused without AVX512-BF16, names parsed") {
  ModeGuard guard;
  REQUIRE(kernels::bf16_dot() == Bf16Dot::auto_);
  REQUIRE(kernels::bf16_dot_active() == kernels::bf16_dot_available());
  kernels::set_bf16_dot(Bf16Dot::off);
  REQUIRE_FALSE(kernels::bf16_dot_active());
  if (kernels::bf16_dot_available()) {
    kernels::set_bf16_dot(Bf16Dot::on);
    REQUIRE(kernels::bf16_dot_active());
  } else {
    REQUIRE_THROWS_WITH(kernels::set_bf16_dot(Bf16Dot::on), Catch::Contains("this CPU has no AVX512-BF16"));
    REQUIRE(kernels::bf16_dot() == Bf16Dot::off);  // unchanged
  }
  for (const Bf16Dot mode : {Bf16Dot::auto_, Bf16Dot::on, Bf16Dot::off})
    REQUIRE(kernels::bf16_dot_from_string(kernels::bf16_dot_name(mode)) == mode);
  REQUIRE_THROWS_WITH(kernels::bf16_dot_from_string("yes"), Catch::Contains("'yes' not in {auto,on,off}"));
}

TEST_CASE("bf16 dot: dot_rows_bf16 is the f32 dot on the widened rows within the activation's rounding") {
  if (lacks_bf16_dot()) return;
  Rng rng(1);
  for (const size_t n : kWidths)
    for (const size_t count : {1, 4, 7}) {  // one row, a group of four, an odd number (groups and a tail)
      INFO("width " << n << ", rows " << count);
      const Rows w = random_bf16_pair(50, n, n + 1);
      const std::vector<float> a = random_vector(n, rng);
      std::vector<uint32_t> ids(count);
      for (uint32_t& id : ids) id = static_cast<uint32_t>(rng.below(50));
      ids.back() = ids.front();  // a row twice
      std::vector<float> got(count), again(count);
      kernels::dot_rows_bf16(a.data(), w.half.bf16_data(), n, ids.data(), count, n, got.data());
      kernels::dot_rows_bf16(a.data(), w.half.bf16_data(), n, ids.data(), count, n, again.data());
      REQUIRE(same_bits(got, again));
      for (size_t e = 0; e < count; ++e) {
        const float* row = w.wide.row(ids[e]);
        double scale = 0;
        for (size_t i = 0; i < n; ++i) scale += std::abs(static_cast<double>(a[i]) * row[i]);
        const float exact = kernels::dot(a.data(), row, n);
        REQUIRE(std::abs(static_cast<double>(got[e]) - exact) <= 0x1p-8 * scale + 1e-6);
        // A row's bits do not depend on the rows computed with it.
        float alone = 0;
        kernels::dot_rows_bf16(a.data(), w.half.bf16_data(), n, &ids[e], 1, n, &alone);
        REQUIRE(std::memcmp(&alone, &got[e], sizeof alone) == 0);
      }
    }
}

TEST_CASE("bf16 dot: axpy_rows_bf16 is the f32 axpy on the widened rows within the coefficients' rounding") {
  if (lacks_bf16_dot()) return;
  Rng rng(2);
  for (const size_t n : kWidths)
    for (const size_t count : {0, 1, 2, 5, 17}) {  // none, one row, a pair, odd numbers
      INFO("width " << n << ", rows " << count);
      const Rows w = random_bf16_pair(40, n, 100 + n);
      std::vector<float> alpha(count);
      std::vector<uint32_t> ids(count);
      for (size_t e = 0; e < count; ++e) {
        alpha[e] = e % 4 == 3 ? 0.0f : 0.1f * static_cast<float>(rng.normal());  // zeros are skipped
        ids[e] = static_cast<uint32_t>(rng.below(40));
      }
      const std::vector<float> y0 = random_vector(n, rng);
      std::vector<float> got = y0, again = y0, exact = y0;
      kernels::axpy_rows_bf16(alpha.data(), w.half.bf16_data(), n, ids.data(), count, n, got.data());
      kernels::axpy_rows_bf16(alpha.data(), w.half.bf16_data(), n, ids.data(), count, n, again.data());
      REQUIRE(same_bits(got, again));
      for (size_t e = 0; e < count; ++e) kernels::axpy(alpha[e], w.wide.row(ids[e]), exact.data(), n);
      if (count == 0) REQUIRE(same_bits(got, y0));
      for (size_t c = 0; c < n; ++c) {
        double scale = std::abs(y0[c]);
        for (size_t e = 0; e < count; ++e) scale += std::abs(static_cast<double>(alpha[e]) * w.wide.at(ids[e], c));
        INFO("column " << c);
        REQUIRE(std::abs(static_cast<double>(got[c]) - exact[c]) <= 0x1p-8 * scale + 1e-6);
      }
    }
}

// The CPU backend's ops on bf16 weights: `off` gives the bits of the f32 ops on the widened weights
// (the kernels before bf16_dot existed), `on` agrees with them within the bound and gives the same
// bits on 1 and 2 threads.
TEST_CASE("bf16 dot: the CPU ops on bf16 weights: off is the widened f32 path, on is within the bound") {
  ModeGuard guard;
  Backend& be = *find_backend("cpu");
  const int threads = be.num_threads();
  for (const size_t d : {1, 37, 64, 128, 256}) {
    INFO("width " << d);
    const Rows input = random_bf16_pair(300, d, d), labels = random_bf16_pair(300, d, 1000 + d, 0.1f);
    Tensor bias(1, d), lbias(300, 1);
    for (size_t c = 0; c < d; ++c) bias.data()[c] = 0.01f * static_cast<float>(c);
    Rng rng(3);
    SparseBatch x;
    ActiveSets active;
    for (int i = 0; i < 9; ++i) {
      std::vector<uint32_t> ids;
      std::vector<float> vals;
      for (int j = 0; j < 15 + i; ++j) {
        ids.push_back(static_cast<uint32_t>(rng.below(300)));
        vals.push_back(static_cast<float>(rng.uniform(-1.0, 1.0)));
      }
      const uint32_t label = 0;
      x.add_point(ids, vals, {&label, 1});
      for (int e = 0; e < 20 + i; ++e) active.ids.push_back(static_cast<uint32_t>(rng.below(300)));
      active.offsets.push_back(active.ids.size());
    }
    SparseFeatures features;
    features.assign(x, be);
    ActiveTensors sets;
    sets.assign(active, be);
    Tensor dlogits(1, active.total());
    for (size_t e = 0; e < active.total(); ++e)
      dlogits.data()[e] = e % 5 == 0 ? 0.0f : 0.01f * static_cast<float>(rng.normal());

    struct Results {
      Tensor h, logits, grad_h;
    };
    const auto run = [&](const Rows& in, const Rows& out, bool half, Results& r) {
      be.sparse_input_forward(features, half ? in.half : in.wide, bias, Act::none, r.h);
      be.active_logits(r.h, sets, half ? out.half : out.wide, lbias, r.logits);
      be.active_backward_input(sets, dlogits, half ? out.half : out.wide, r.grad_h);
    };
    kernels::set_bf16_dot(Bf16Dot::off);
    Results wide, off;
    run(input, labels, false, wide);
    run(input, labels, true, off);
    REQUIRE(same_bits(off.h, wide.h));
    REQUIRE(same_bits(off.logits, wide.logits));
    REQUIRE(same_bits(off.grad_h, wide.grad_h));
    if (!kernels::bf16_dot_available()) continue;

    kernels::set_bf16_dot(Bf16Dot::on);
    Results on, one_thread;
    be.set_num_threads(2);
    run(input, labels, true, on);
    be.set_num_threads(1);
    run(input, labels, true, one_thread);
    be.set_num_threads(threads);
    REQUIRE(same_bits(on.h, one_thread.h));
    REQUIRE(same_bits(on.logits, one_thread.logits));
    REQUIRE(same_bits(on.grad_h, one_thread.grad_h));
    // Each op against the widened path on the same inputs (the logits from `off`'s h, so that only
    // this op's rounding counts).
    for (size_t i = 0; i < x.size(); ++i) {
      const auto ids = x.features_of(i);
      const auto vals = x.values_of(i);
      for (size_t c = 0; c < d; ++c) {
        double scale = std::abs(bias.data()[c]);
        for (size_t j = 0; j < ids.size(); ++j) scale += std::abs(vals[j] * input.wide.at(ids[j], c));
        REQUIRE(std::abs(static_cast<double>(on.h.at(i, c)) - wide.h.at(i, c)) <= 0x1p-8 * scale + 1e-6);
      }
    }
    Results mixed;
    be.active_logits(wide.h, sets, labels.half, lbias, mixed.logits);
    for (size_t i = 0; i < x.size(); ++i)
      for (uint64_t e = active.offsets[i]; e < active.offsets[i + 1]; ++e) {
        double scale = 0;
        for (size_t c = 0; c < d; ++c) scale += std::abs(wide.h.at(i, c) * labels.wide.at(active.ids[e], c));
        REQUIRE(std::abs(static_cast<double>(mixed.logits.data()[e]) - wide.logits.data()[e]) <= 0x1p-8 * scale + 1e-6);
      }
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t c = 0; c < d; ++c) {
        double scale = 0;
        for (uint64_t e = active.offsets[i]; e < active.offsets[i + 1]; ++e)
          scale += std::abs(dlogits.data()[e] * labels.wide.at(active.ids[e], c));
        REQUIRE(std::abs(static_cast<double>(on.grad_h.at(i, c)) - wide.grad_h.at(i, c)) <= 0x1p-8 * scale + 1e-6);
      }
  }
}

// --precision bf16's dense products on the CPU (Backend::set_bf16_products, kernels/matmul.h's
// matmul_bf16): the operands rounded to bf16, oneDNN's AVX512-BF16 matmul summing their products in
// f32. A product of two bf16 values is exact in f32, so the result is the f32 product of the rounded
// operands up to the order of the f32 sums: each side's recursive sum is within k 2^-24 S of the
// exact one (S = sum |a_i b_i| over the k terms, plus |C0| when accumulating), so elementwise
// |got - rounded| <= 2 (k + 1) 2^-24 S, and the nmse bound 1e-8 is far above what that allows here.
// Against the f32 product of the f32 operands, each operand's rounding (2^-9 relative) bounds it:
// nmse <= 1e-4 (as the CUDA backend's case, tests/kernels/test_cuda_ops.cpp).
TEST_CASE("bf16 products: the CPU backend's are f32 sums of bf16-rounded operands where the mode is active") {
  ModeGuard guard;
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  REQUIRE(kernels::bf16_dot() == Bf16Dot::auto_);
  if (!kernels::bf16_dot_active()) {
    CHECK_FALSE(cpu->set_bf16_products(true));  // no AVX512-BF16: f32 products stay
    CHECK(cpu->set_bf16_products(false));
    WARN("SKIP: this CPU has no AVX512-BF16, the bf16 products were not exercised");
    return;
  }
  // f32 for the references; back to f32 products however this case ends (the backend lives for
  // the process).
  const std::unique_ptr<Backend, void (*)(Backend*)> reset(cpu, [](Backend* b) { b->set_bf16_products(false); });
  using testing::ProductShape;
  for (const ProductShape& sh :
       {ProductShape{1, 1, 1, false, false, false}, ProductShape{7, 13, 5, false, true, false},
        ProductShape{33, 17, 65, true, false, true}, ProductShape{128, 256, 128, false, true, false},
        ProductShape{1024, 512, 128, false, false, false}, ProductShape{64, 1000, 128, true, true, true},
        ProductShape{128, 64, 4096, true, false, true}, ProductShape{5, 7, 0, false, false, false},
        ProductShape{5, 7, 0, true, true, true}}) {
    INFO("m " << sh.m << " n " << sh.n << " k " << sh.k << " trans_a " << sh.ta << " trans_b " << sh.tb
              << " accumulate " << sh.acc);
    testing::ProductOperands ops(sh);
    auto& [a, b, c0, ar, br] = ops;
    std::vector<float> got(c0), again(c0), rounded(c0), exact(c0);
    const auto product = [&](bool bf16, std::vector<float>& x, std::vector<float>& y, std::vector<float>& out) {
      REQUIRE(cpu->set_bf16_products(bf16));
      testing::backend_product(*cpu, sh, x, y, out);
    };
    product(true, a, b, got);
    product(true, a, b, again);
    product(false, ar, br, rounded);
    product(false, a, b, exact);
    CHECK(same_bits(got, again));
    const double to_rounded = testing::nmse(got, rounded), to_exact = testing::nmse(got, exact);
    std::printf("cpu bf16 matmul m=%lld n=%lld k=%lld: nmse %.2e to the f32 product of rounded operands, %.2e to "
                "the f32 product\n",
                static_cast<long long>(sh.m), static_cast<long long>(sh.n), static_cast<long long>(sh.k), to_rounded,
                to_exact);
    CHECK(to_rounded <= 1e-8);
    CHECK(to_exact <= 1e-4);
    // Elementwise, the sum-order bound (the worst element only, to keep the log short).
    double worst = 0;
    for (int64_t i = 0; i < sh.m; ++i)
      for (int64_t j = 0; j < sh.n; ++j) {
        double s = sh.acc ? std::abs(double{c0[static_cast<size_t>(i * sh.n + j)]}) : 0.0;
        for (int64_t p = 0; p < sh.k; ++p) {
          const float x = ar[static_cast<size_t>(sh.ta ? p * sh.m + i : i * sh.k + p)];
          const float y = br[static_cast<size_t>(sh.tb ? j * sh.k + p : p * sh.n + j)];
          s += std::abs(double{x} * y);
        }
        const auto e = static_cast<size_t>(i * sh.n + j);
        const double bound = 2.0 * static_cast<double>(sh.k + 1) * 0x1p-24 * s;
        worst = std::max(worst, std::abs(double{got[e]} - rounded[e]) - bound);
      }
    CHECK(worst <= 0);
  }
}

TEST_CASE("bf16 products: the CPU backend refuses them under --bf16-dot off, and so does the counting device") {
  ModeGuard guard;
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  kernels::set_bf16_dot(Bf16Dot::off);
  CHECK_FALSE(cpu->set_bf16_products(true));
  CHECK(cpu->set_bf16_products(false));
  kernels::set_bf16_dot(Bf16Dot::auto_);
  Backend* emulated = find_backend("emulated");
  REQUIRE(emulated != nullptr);
  // The counting device runs the CPU backend's products: the same answer, the same flag.
  const std::unique_ptr<Backend, void (*)(Backend*)> reset(cpu, [](Backend* b) { b->set_bf16_products(false); });
  CHECK(emulated->set_bf16_products(true) == kernels::bf16_dot_active());
  CHECK(emulated->set_bf16_products(false));
}
