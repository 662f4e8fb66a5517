// The `kernels` test: every op of every registered Backend against the scalar reference of the
// parity harness (tests/kernels/backend_harness.h), and the harness's self-test; and the CPU
// kernels' vectorized paths against their scalar loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/active_extend.h"
#include "core/bucket_union.h"
#include "core/device_rng.h"
#include "core/rng.h"
#include "gpu/cuda_info.h"
#include "kernels/bf16_dot.h"
#include "kernels/lsh_ops.h"
#include "kernels/vector_ops.h"
#include "tests/kernels/backend_harness.h"

using namespace frugal;
using harness::Tally;
using harness::run_all;

TEST_CASE("the CPU backend takes bf16 products exactly where the bf16 dot mode is active") {
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  // AVX512-BF16 and --bf16-dot auto|on: oneDNN's bf16 matmul (tests/kernels/test_bf16_dot.cpp);
  // otherwise f32 products stay. Back to f32 either way, for the cases after this one.
  CHECK(cpu->set_bf16_products(true) == kernels::bf16_dot_active());
  CHECK(cpu->set_bf16_products(false));
}

TEST_CASE("the backend registry has the CPU backend as the host backend") {
  REQUIRE_FALSE(backends().empty());
  Backend* cpu = find_backend("cpu");
  REQUIRE(cpu != nullptr);
  CHECK(&host_backend() == cpu);
  CHECK(cpu->device().is_host());
  CHECK(find_backend("no-such-backend") == nullptr);
  std::set<std::string> names;
  for (Backend* b : backends()) CHECK(names.insert(b->name()).second);
  for (const Op op : all_ops()) CHECK(!op_name(op).empty());
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

TEST_CASE("DWTA: the AVX2 blocks of eight vectors equal the scalar loop's, ties, NaNs and empty bins included") {
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
    // Listed rows, out of order, fewer than a block's eight at the end: each listed row's codes are
    // those of the whole matrix's pass.
    const std::vector<uint32_t> listed = {49, 3, 17, 0, 8, 9, 31, 2, 44, 12, 5};
    std::vector<uint32_t> some_fast(listed.size() * tables), some_scalar(listed.size() * tables);
    kernels::dwta_codes(spec, x, listed, some_fast.data(), true);
    kernels::dwta_codes(spec, x, listed, some_scalar.data(), false);
    REQUIRE(some_fast == some_scalar);
    for (size_t j = 0; j < listed.size(); ++j)
      for (size_t t = 0; t < tables; ++t) REQUIRE(some_fast[j * tables + t] == scalar[listed[j] * tables + t]);
    // Codes wider than the tables (5 bits) are folded by hashing.
    DwtaSpec narrow = spec;
    narrow.bucket_bits = narrow.max_bucket_bits = 5;
    kernels::dwta_codes(narrow, x, {}, fast.data(), true);
    kernels::dwta_codes(narrow, x, {}, scalar.data(), false);
    REQUIRE(fast == scalar);
    for (const uint32_t code : fast) REQUIRE(code < 32u);
  }
}

// The CUDA backend's bucket_union kernel is core/bucket_union.h's block program; run here on the
// host, phase after phase, each phase thread after simulated thread, it must give the definition's
// result whatever the thread count: this checks the phases and how they split the slots among
// threads (the kernel adds nothing but a barrier between the same phases).
TEST_CASE("dot_rows gives each row the bits of dot, at the widths it specializes and others") {
  Rng rng(41);
  for (const size_t n : {1, 15, 16, 17, 32, 64, 100, 128, 130}) {
    const size_t rows = 37, ld = n + 3;  // rows further apart than their width
    std::vector<float> a(n), w(rows * ld);
    for (float& x : a) x = static_cast<float>(rng.normal());
    for (float& x : w) x = static_cast<float>(rng.normal()) * (rng.below(9) == 0 ? 1e6f : 1.0f);
    for (const size_t count : {0, 1, 2, 5, 36}) {
      std::vector<uint32_t> ids(count);
      for (uint32_t& id : ids) id = static_cast<uint32_t>(rng.below(rows));
      std::vector<float> out(count, -1.0f);
      kernels::dot_rows(a.data(), w.data(), ld, ids.data(), count, n, out.data());
      for (size_t e = 0; e < count; ++e) {
        const float want = kernels::dot(a.data(), w.data() + ids[e] * ld, n);
        INFO("n " << n << " count " << count << " row " << e);
        REQUIRE(std::memcmp(&out[e], &want, sizeof want) == 0);
      }
    }
  }
}

TEST_CASE("axpy_rows gives the bits of axpy row by row, skipping zero coefficients only when asked") {
  Rng rng(43);
  for (const size_t n : {1, 7, 16, 33, 128}) {
    const size_t rows = 29, ld = n + 5;
    std::vector<float> x(rows * ld);
    for (float& v : x) v = static_cast<float>(rng.normal());
    x[3 * ld] = std::numeric_limits<float>::infinity();  // 0 x inf is NaN: a skipped zero must not add it
    for (const size_t count : {0, 1, 2, 3, 8, 41}) {
      std::vector<uint32_t> ids(count);
      std::vector<float> alpha(count);
      for (size_t e = 0; e < count; ++e) {
        ids[e] = static_cast<uint32_t>(rng.below(rows));
        alpha[e] = rng.below(3) == 0 ? 0.0f : static_cast<float>(rng.normal());
      }
      for (const bool skip : {true, false}) {
        std::vector<float> y(n), want(n);
        for (size_t i = 0; i < n; ++i) y[i] = want[i] = static_cast<float>(rng.normal());
        if (n > 1) y[1] = want[1] = -0.0f;  // -0 + 0 x finite is +0: another sign a skip keeps
        kernels::axpy_rows(alpha.data(), x.data(), ld, ids.data(), count, n, skip, y.data());
        for (size_t e = 0; e < count; ++e)
          if (!(skip && alpha[e] == 0.0f)) kernels::axpy(alpha[e], x.data() + ids[e] * ld, want.data(), n);
        INFO("n " << n << " count " << count << " skip " << skip);
        REQUIRE(std::memcmp(y.data(), want.data(), n * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("bucket union: the device's block program equals the definition at every thread count") {
  struct Shape {
    size_t samples, tables;
    uint32_t buckets;
    size_t neurons, capacity, labels, cap;
  };
  const Shape shapes[] = {{6, 5, 8, 60, 6, 3, 0},         {6, 5, 8, 60, 6, 3, 7},
                          {5, 12, 16, 300, 20, 4, 25},    {3, 50, 64, 2000, 128, 30, 0},
                          {3, 50, 64, 2000, 128, 30, 40}, {4, 4, 8, 40, 10, 6, 3},
                          {2, 100, 32, 5000, 128, 5, 0},  {3, 1, 1, 1, 1, 1, 0}};
  size_t compared = 0;
  for (const Shape& sh : shapes) {
    const harness::BucketFixture f = harness::random_buckets(sh.samples * 977 + sh.tables, sh.samples, sh.tables,
                                                             sh.buckets, sh.neurons, sh.capacity, sh.labels);
    const ActiveSets want = harness::reference_union(f, sh.cap);
    // The flat layout of the device copy: offsets shifted by each table's start among the ids.
    std::vector<uint32_t> offsets, ids;
    for (size_t t = 0; t < sh.tables; ++t) {
      const auto base = static_cast<uint32_t>(ids.size());
      for (const uint32_t o : f.offsets[t]) offsets.push_back(base + o);
      ids.insert(ids.end(), f.ids[t].begin(), f.ids[t].end());
    }
    const bucket_union::FlatTables flat{offsets.data(), ids.data(), sh.buckets};
    for (const uint32_t threads : {1u, 3u, 32u, 512u}) {
      INFO("tables " << sh.tables << ", cap " << sh.cap << ", threads " << threads);
      for (size_t i = 0; i < sh.samples; ++i) {
        const uint64_t l0 = f.label_offsets[i], l1 = f.label_offsets[i + 1];
        std::vector<uint32_t> out(l1 - l0 + sh.tables * sh.capacity + 1, 0xdeadbeef);
        const bucket_union::Problem<bucket_union::FlatTables> p{
            .tables = flat, .num_tables = static_cast<uint32_t>(sh.tables), .codes = &f.codes[i * sh.tables],
            .labels = f.labels.data() + l0, .num_labels = static_cast<uint32_t>(l1 - l0), .cap = sh.cap,
            .out = out.data()};
        const uint32_t count = bucket_union::run_on_host(p, threads);
        const std::vector<uint32_t> got(out.begin(), out.begin() + count);
        const std::vector<uint32_t> expected(want.ids.begin() + static_cast<std::ptrdiff_t>(want.offsets[i]),
                                             want.ids.begin() + static_cast<std::ptrdiff_t>(want.offsets[i + 1]));
        CHECK(got == expected);
        ++compared;
      }
    }
  }
  CHECK(compared == 4 * (6 + 6 + 5 + 3 + 3 + 4 + 2 + 3));
}

// The CUDA kernel's way of running core/active_extend.h (membership by a search of the sample's own
// set, an insertion sort of the draws, a region per sample) against the definition, on the host.
TEST_CASE("active extension: the device's program equals the definition") {
  // core/rng.h's generator and the device's copy of it give the same numbers.
  Rng rng(42);
  DeviceRng stream{rng.state()};
  CHECK(DeviceRng::seeded(42).state == Rng(42).state());
  for (int i = 0; i < 1000; ++i) {
    const uint64_t n = 1 + static_cast<uint64_t>(i) * 7919;
    REQUIRE(stream.split(n).state == rng.split(n).state());
    REQUIRE(stream.below(n) == rng.below(n));
    REQUIRE(stream.uniform() == rng.uniform());
  }
  size_t compared = 0;
  for (const auto& [neurons, members, min_active, draws, cap] :
       {std::tuple<size_t, size_t, size_t, size_t, size_t>{50, 12, 20, 16, 0}, {50, 12, 20, 16, 25}, {7, 3, 5, 40, 0},
        {2000, 300, 256, 64, 512}, {2000, 300, 256, 64, 128}, {30, 40, 25, 64, 0}, {100, 20, 0, 0, 0}}) {
    Rng r(neurons * 3 + members + cap);
    ActiveSets in;
    for (size_t i = 0; i < 8; ++i) {
      std::set<uint32_t> ids;
      const size_t n = std::min(neurons, static_cast<size_t>(r.below(members + 1)));
      while (ids.size() < n) ids.insert(static_cast<uint32_t>(r.below(neurons)));
      in.ids.insert(in.ids.end(), ids.begin(), ids.end());
      in.offsets.push_back(in.ids.size());
    }
    const harness::ExtensionTables x = harness::random_extension_tables(r, neurons, draws);
    const ActiveExtension e{.rng_state = r.next_u64(), .neurons = neurons, .min_active = min_active, .cap = cap,
                            .draws = draws};
    const ActiveSets want = harness::reference_extension(in, e, x.threshold, x.alias, x.log_prob);
    const active_extend::Spec spec{.rng_state = e.rng_state, .neurons = neurons, .min_active = min_active,
                                   .cap = cap, .draws = draws, .logq = true, .threshold = x.threshold.data(),
                                   .alias = x.alias.data(), .log_prob = x.log_prob.data(),
                                   .log_count = x.log_count.data()};
    for (size_t i = 0; i < in.num_samples(); ++i) {
      const uint64_t n = in.offsets[i + 1] - in.offsets[i];
      std::vector<uint32_t> out(active_extend::room_needed(spec, n), 0xdeadbeef), drawn(draws);
      std::vector<float> offsets(out.size(), -1.0f);
      std::copy_n(in.ids.begin() + static_cast<std::ptrdiff_t>(in.offsets[i]), n, out.begin());
      const auto member = [&](uint32_t id, uint64_t count) {
        return std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(count), id) !=
               out.begin() + static_cast<std::ptrdiff_t>(count);
      };
      const uint64_t size = active_extend::extend(spec, i, out.data(), n, draws > 0 ? offsets.data() : nullptr,
                                                  drawn.data(), member, active_extend::insertion_sort);
      INFO("neurons " << neurons << ", draws " << draws << ", cap " << cap << ", sample " << i);
      REQUIRE(size == want.offsets[i + 1] - want.offsets[i]);
      for (uint64_t k = 0; k < size; ++k) {
        CHECK(out[k] == want.ids[want.offsets[i] + k]);
        if (draws > 0) CHECK(offsets[k] == want.logit_offsets[want.offsets[i] + k]);
      }
      ++compared;
    }
  }
  CHECK(compared == 7 * 8);
}

// RowUpdate::all_rows (a dense parameter's update without its row list, one count for every row)
// gives the bits of the same update with the rows listed, on every backend, for Adam (f32 and bf16
// storage), SGD and Adagrad.
TEST_CASE("optimizer rows: every row without a list equals the rows listed, on every backend") {
  for (Backend* be : backends()) {
    for (const Dtype dtype : {Dtype::f32, Dtype::bf16})
      for (const Op op : {Op::adam_rows, Op::sgd_rows, Op::adagrad_rows}) {
        INFO(be->name() << " " << op_name(op) << " " << dtype_name(dtype));
        constexpr size_t kRows = 37, kCols = 5;
        Rng rng(11);
        Tensor w0(kRows, kCols), g(kRows, kCols);
        for (size_t i = 0; i < kRows; ++i)
          for (size_t c = 0; c < kCols; ++c) {
            w0.at(i, c) = static_cast<float>(rng.normal());
            g.at(i, c) = static_cast<float>(rng.normal());
          }
        Tensor corrections(4, 2);
        for (size_t t = 1; t < 4; ++t) {
          corrections.at(t, 0) = 1.0f / (1.0f - std::pow(0.9f, static_cast<float>(t)));
          corrections.at(t, 1) = 1.0f / (1.0f - std::pow(0.999f, static_cast<float>(t)));
        }
        std::vector<uint32_t> rows(kRows), counts(kRows, 3);
        std::iota(rows.begin(), rows.end(), 0u);
        const uint32_t one_count[1] = {3};
        Tensor result[2];
        for (const bool all : {false, true}) {
          Tensor w(kRows, kCols, dtype), m(kRows, kCols, dtype), v(kRows, kCols, dtype);
          w.assign(w0);
          for (Tensor* t : {&w, &m, &v}) place_on(*t, be);
          const Tensor dg = to_backend(g, be), dc = to_backend(corrections, be);
          RowUpdate u;
          u.w = &w;
          u.m = &m;
          u.v = op == Op::adam_rows ? &v : nullptr;
          u.all_rows = all;
          if (!all) u.rows = rows;
          u.grad = &dg;
          u.lr = 0.01f;
          u.beta1 = 0.9f;
          u.beta2 = 0.999f;
          u.eps = 1e-8f;
          u.momentum = 0.9f;
          u.round_seed = 5;
          if (op == Op::adam_rows) {
            u.counts = all ? std::span<const uint32_t>(one_count) : std::span<const uint32_t>(counts);
            u.corrections = &dc;
            be->adam_rows(u);
          } else {
            op == Op::sgd_rows ? be->sgd_rows(u) : be->adagrad_rows(u);
          }
          result[all ? 1 : 0] = to_host(w);
        }
        REQUIRE(result[0].bytes() == result[1].bytes());
        CHECK(std::memcmp(result[0].raw(), result[1].raw(), result[0].bytes()) == 0);
      }
  }
}
