// The `kernels_cuda` test: the parity harness (tests/kernels/backend_harness.h) on the "cuda"
// backend, against the scalar reference and against the "cpu" backend's outputs for the same
// inputs. Without a visible CUDA device it exits 77, which Meson reports as SKIP: never a pass.
//
// NMSE bounds (fp32): against the scalar reference, the harness's own: 1e-10 for every op with a
// fixed summation order, 1e-8 for matmul (cuBLAS blocks and reorders its sums). Against the CPU
// backend, 4x those (each side within the bound of the reference: sqrt-NMSEs add, so the
// difference is within (1 + 1)^2 = 4 bounds). Rows, labels, codes and non-finite values: equal.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "gpu/cuda_info.h"
#include "kernels/bf16_dot.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/bf16_products.h"

using namespace frugal;

namespace {

constexpr int kSkip = 77;  // Meson's exit code for a skipped test

// One case's outputs on a backend (what the harness's comparisons saw), or the error it threw.
std::vector<harness::Compare::Recorded> outputs(Backend& be, const harness::Case& c, std::string& error) {
  std::vector<harness::Compare::Recorded> got;
  harness::Compare cmp;
  cmp.record = &got;
  try {
    c.run(be, cmp);
  } catch (const std::exception& e) {
    error = e.what();
  }
  return got;
}

}  // namespace

TEST_CASE("the CUDA backend is registered and supports every op") {
  Backend* cuda = find_backend("cuda");
  REQUIRE(cuda != nullptr);
  CHECK(gpu::cuda_built());
  CHECK(gpu::device_count() >= 1);
  for (const Op op : all_ops()) {
    INFO(op_name(op));
    CHECK(cuda->supports(op));
  }
  CHECK(&host_backend() == find_backend("cpu"));  // registering does not change the default
}

TEST_CASE("every op of the CUDA backend matches the scalar reference") {
  Backend* cuda = find_backend("cuda");
  REQUIRE(cuda != nullptr);
  const harness::Tally t = harness::run_all(*cuda, false);
  std::printf("cuda parity: %zu OK, %zu FAIL, %zu SKIP\n", t.ok, t.fail, t.skip);
  CHECK(t.fail == 0);
  CHECK(t.skip == 0);
  CHECK(t.ok > 0);
}

TEST_CASE("every op of the CUDA backend matches the CPU backend") {
  Backend* cuda = find_backend("cuda");
  Backend* cpu = find_backend("cpu");
  REQUIRE(cuda != nullptr);
  REQUIRE(cpu != nullptr);
  size_t ok = 0, fail = 0;
  for (const harness::OpCases& oc : harness::all_cases())
    for (const harness::Case& c : oc.cases) {
      std::string cpu_error, cuda_error;
      const auto want = outputs(*cpu, c, cpu_error);
      const auto got = outputs(*cuda, c, cuda_error);
      double err2 = 0, ref2 = 0;
      size_t mismatches = 0, same_bits = 0;
      const bool same_count = got.size() == want.size();
      for (size_t i = 0; same_count && i < got.size(); ++i) {
        const double g = got[i].value, w = want[i].value;
        if (g == w || (std::isnan(g) && std::isnan(w))) ++same_bits;
        if (got[i].exact || want[i].exact || !std::isfinite(g) || !std::isfinite(w)) {
          if (!(g == w || (std::isnan(g) && std::isnan(w)))) ++mismatches;
          continue;
        }
        err2 += (g - w) * (g - w);
        ref2 += w * w;
      }
      const double nmse = ref2 > 0 ? err2 / ref2 : err2, bound = 4 * oc.bound;
      const bool pass = cpu_error.empty() && cuda_error.empty() && same_count && mismatches == 0 && nmse <= bound;
      std::printf("cuda vs cpu  %-22s %-58s %s  nmse=%.2e (bound %.0e) mismatches=%zu identical=%zu/%zu%s%s%s%s\n",
                  std::string(op_name(oc.op)).c_str(), c.shape.c_str(), pass ? "OK  " : "FAIL", nmse, bound,
                  mismatches, same_bits, got.size(), cpu_error.empty() ? "" : " cpu error: ", cpu_error.c_str(),
                  cuda_error.empty() ? "" : " cuda error: ", cuda_error.c_str());
      INFO("cuda vs cpu " << op_name(oc.op) << " " << c.shape << ": nmse " << nmse << " mismatches " << mismatches
                          << " outputs " << got.size() << " vs " << want.size() << " " << cpu_error << cuda_error);
      CHECK(pass);
      ++(pass ? ok : fail);
    }
  std::printf("cuda vs cpu: %zu OK, %zu FAIL\n", ok, fail);
}

// --precision bf16's dense products (Backend::set_bf16_products): the CUDA backend rounds both
// operands to bf16 and sums their products in f32 on tensor cores. A product of two bf16 values is
// exact in f32, so the result is the CPU's f32 product of the rounded operands up to the order of
// the sums (the GEMM bound), and within bf16's rounding (2^-8 relative per operand) of the f32 one.
TEST_CASE("the CUDA backend's bf16 products are f32 sums of bf16-rounded operands") {
  Backend* cuda = find_backend("cuda");
  Backend* cpu = find_backend("cpu");
  REQUIRE(cuda != nullptr);
  REQUIRE(cpu != nullptr);
  // The CPU's bf16 products where the bf16 dot mode is active (kernels/bf16_dot.h); its f32 ones
  // are the references below.
  CHECK(cpu->set_bf16_products(true) == kernels::bf16_dot_active());
  CHECK(cpu->set_bf16_products(false));
  REQUIRE(cuda->set_bf16_products(true));
  // Back to f32 products however this case ends (the backend lives for the process).
  const std::unique_ptr<Backend, void (*)(Backend*)> reset(cuda, [](Backend* b) { b->set_bf16_products(false); });
  using testing::ProductShape;
  for (const ProductShape& sh :
       {ProductShape{1, 1, 1, false, false, false}, ProductShape{7, 13, 5, false, true, false},
        ProductShape{33, 17, 65, true, false, true}, ProductShape{128, 256, 128, false, true, false},
        ProductShape{1024, 512, 128, false, false, false}, ProductShape{64, 1000, 128, true, true, true}}) {
    testing::ProductOperands ops(sh);
    auto& [a, b, c0, ar, br] = ops;
    std::vector<float> got(c0), rounded(c0), exact(c0);
    testing::backend_product(*cuda, sh, a, b, got);
    testing::backend_product(*cpu, sh, ar, br, rounded);
    testing::backend_product(*cpu, sh, a, b, exact);
    const double to_rounded = testing::nmse(got, rounded), to_exact = testing::nmse(got, exact);
    std::printf("cuda bf16 matmul m=%lld n=%lld k=%lld: nmse %.2e to the f32 product of rounded operands, %.2e to "
                "the f32 product\n",
                static_cast<long long>(sh.m), static_cast<long long>(sh.n), static_cast<long long>(sh.k), to_rounded,
                to_exact);
    CHECK(to_rounded <= 1e-8);
    CHECK(to_exact <= 1e-4);
  }
}

int main(int argc, char** argv) {
  if (find_backend("cuda") == nullptr) {
    std::printf("SKIP: no CUDA device visible (CUDA backend %s, device_count() = %d): nothing was checked\n",
                gpu::cuda_built() ? "built" : "not built", gpu::device_count());
    return kSkip;
  }
  return Catch::Session().run(argc, argv);
}
