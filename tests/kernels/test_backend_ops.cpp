// The `kernels` test: every op of every registered Backend against the scalar reference of the
// parity harness (tests/kernels/backend_harness.h), and the harness's self-test; and the CPU
// kernels' vectorized paths against their scalar loops.
#include <catch2/catch.hpp>

#include <cstdio>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include "core/backend.h"
#include "core/rng.h"
#include "gpu/cuda_info.h"
#include "kernels/lsh_ops.h"
#include "tests/kernels/backend_harness.h"

using namespace frugal;
using harness::Tally;
using harness::run_all;

TEST_CASE("the backend registry has the CPU backend as default") {
  REQUIRE_FALSE(backends().empty());
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  CHECK(&default_backend() == cpu);
  CHECK(cpu->device().is_host());
  CHECK(find_backend("no-such-backend") == nullptr);
  std::set<std::string> names;
  for (Backend* b : backends()) CHECK(names.insert(b->name()).second);
  for (const Op op : all_ops()) CHECK(!op_name(op).empty());
  // Only apps/ picks another backend; setting one and going back restores "cpu".
  set_default_backend(cpu);
  CHECK(&default_backend() == cpu);
  set_default_backend(nullptr);
  CHECK(&default_backend() == cpu);
  // A workspace follows its backend.
  std::unique_ptr<RowWorkspace> slot;
  RowWorkspace& ws = row_workspace(*cpu, slot, 12);
  CHECK(ws.owner() == cpu);
  CHECK(ws.num_rows() == 12);
  CHECK(&row_workspace(*cpu, slot, 12) == &ws);
}

TEST_CASE("the CUDA backend is registered exactly when a CUDA device is visible") {
  const int devices = gpu::device_count();
  CHECK(devices >= 0);
  if (!gpu::cuda_built()) CHECK(devices == 0);
  Backend* cuda = find_backend("cuda");
  CHECK((cuda != nullptr) == (devices > 0));
  std::printf("CUDA backend: %s, %d device(s), %s\n", gpu::cuda_built() ? "built" : "not built", devices,
              cuda != nullptr ? "registered as \"cuda\"" : "not registered");
}

TEST_CASE("every op of every backend matches the scalar reference") {
  Tally total;
  for (Backend* be : backends()) {
    const Tally t = run_all(*be, false);
    total.ok += t.ok;
    total.fail += t.fail;
    total.skip += t.skip;
  }
  std::printf("parity: %zu OK, %zu FAIL, %zu SKIP\n", total.ok, total.fail, total.skip);
  if (total.skip > 0) WARN(total.skip << " (backend, op, shape) cases skipped: not supported, not passed");
  CHECK(total.fail == 0);
  CHECK(total.ok > 0);
}

TEST_CASE("the harness fails when the reference is wrong") {
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  std::printf("--- self-test: every reference deliberately wrong, every comparing case must FAIL ---\n");
  const Tally t = run_all(*cpu, true);
  CHECK(t.fail > 0);
}

TEST_CASE("DWTA: the AVX2 winners equal the scalar loop's, ties, NaNs and empty bins included") {
  // Values from a small set make ties among the largest values common; NaNs and negative values
  // must never win; a bin with no positive value must stay empty (and borrow by densification).
  for (const int bin_size : {2, 4, 8, 16}) {
    const size_t tables = 37, dim = 96, rows = 50;  // 37 * k bins: whole groups of 8 and a remainder
    const int k = 3;
    int bin_bits = 0;
    while ((1 << bin_bits) < bin_size) ++bin_bits;
    Rng rng(static_cast<uint64_t>(bin_size));
    std::vector<uint32_t> coords(tables * k * bin_size);
    for (uint32_t& c : coords) c = static_cast<uint32_t>(rng.below(dim));
    Tensor x(rows, dim);
    const float levels[] = {0.0f, 0.5f, 1.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), -0.0f};
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < dim; ++c) x.at(r, c) = r == 0 ? -1.0f : levels[rng.below(6)];
    const DwtaSpec spec{.coords = coords, .k = k, .bin_size = bin_size, .bin_bits = bin_bits,
                        .bucket_bits = std::min(k * bin_bits, 18), .max_bucket_bits = 18, .tables = tables,
                        .seed = 11};
    std::vector<uint32_t> fast(rows * tables), scalar(rows * tables);
    kernels::dwta_codes(spec, x, {}, fast.data(), true);
    kernels::dwta_codes(spec, x, {}, scalar.data(), false);
    INFO("bin_size " << bin_size);
    REQUIRE(fast == scalar);
  }
}
