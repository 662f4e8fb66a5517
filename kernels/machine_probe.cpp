#include "kernels/machine_probe.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(thread) on `threads` threads released together; returns the wall seconds from the
// release until the last one finished.
double timed_parallel(size_t threads, const std::function<void(size_t)>& body) {
  std::latch ready(static_cast<std::ptrdiff_t>(threads) + 1), go(1);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.count_down();
      go.wait();
      body(t);
    });
  ready.arrive_and_wait();
  const auto start = Clock::now();
  go.count_down();
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Twelve independent accumulators: enough to cover the FMA latency on both pipes of current cores.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_avx512(size_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
  for (size_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (const float l : lanes) total += l;
  return total;
}

__attribute__((target("avx2,fma"))) float fma_avx2(size_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  const __m256 mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(1e-7f);
  for (size_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0.0f;
  for (const float l : lanes) total += l;
  return total;
}

float fma_scalar(size_t iterations) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 1.0f + 0.01f * static_cast<float>(c);
  for (size_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * 0.9999999f + 1e-7f;
  float total = 0.0f;
  for (const float a : acc) total += a;
  return total;
}

struct FmaKernel {
  const char* isa;
  int lanes;
  float (*run)(size_t);
};

FmaKernel best_fma() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, fma_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2+fma", 8, fma_avx2};
  return {"scalar", 1, fma_scalar};
}

double probe_flops(const ProbeOptions& o, const FmaKernel& k) {
  constexpr size_t kIterations = 20'000'000;
  std::vector<float> sink(o.threads);
  double best = 0.0;
  for (int r = 0; r < o.repeats; ++r) {
    const double s = timed_parallel(o.threads, [&](size_t t) { sink[t] = k.run(kIterations); });
    best = std::max(best, 2.0 * kChains * k.lanes * static_cast<double>(kIterations) * static_cast<double>(o.threads) / s);
  }
  // The sums keep the loops from being optimized away; they are finite by construction.
  for (const float v : sink) FRUGAL_CHECK(v == v, "FMA probe: a non-finite sum");
  return best;
}

double probe_stream(const ProbeOptions& o) {
  const size_t n = o.array_bytes / sizeof(float), share = n / o.threads;
  FRUGAL_CHECK(share > 0, "stream probe: arrays smaller than one element per thread");
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
  // First touch by the thread that later streams each share.
  timed_parallel(o.threads, [&](size_t t) {
    for (size_t i = t * share; i < (t + 1) * share; ++i) {
      a[i] = 0.0f;
      b[i] = 1.0f;
      c[i] = 2.0f;
    }
  });
  double best = 0.0;
  for (int r = 0; r < o.repeats; ++r) {
    const float s = 0.5f + static_cast<float>(r);
    const double secs = timed_parallel(o.threads, [&](size_t t) {
      float* __restrict pa = a.get() + t * share;
      const float* __restrict pb = b.get() + t * share;
      const float* __restrict pc = c.get() + t * share;
      for (size_t i = 0; i < share; ++i) pa[i] = pb[i] + s * pc[i];
    });
    best = std::max(best, 3.0 * sizeof(float) * static_cast<double>(share * o.threads) / secs);
  }
  FRUGAL_CHECK(a[n / 2] == a[n / 2], "stream probe: a non-finite value");
  return best;
}

double probe_gather(const ProbeOptions& o) {
  constexpr size_t kAhead = 8;
  const size_t row_floats = o.row_bytes / sizeof(float), rows = o.table_bytes / o.row_bytes;
  FRUGAL_CHECK(row_floats > 0 && rows > 0, "gather probe: rows or table too small");
  const size_t per_thread = std::max<size_t>(1, rows / o.threads / 4);  // a quarter of the table per thread
  std::unique_ptr<float[]> table(new float[rows * row_floats]);
  const size_t slab = rows / o.threads;
  timed_parallel(o.threads, [&](size_t t) {
    const size_t end = t + 1 == o.threads ? rows : (t + 1) * slab;
    std::fill(table.get() + t * slab * row_floats, table.get() + end * row_floats, 1.0f);
  });
  std::vector<std::vector<uint32_t>> order(o.threads);
  for (size_t t = 0; t < o.threads; ++t) {
    Rng rng = Rng(0x9a7).split(t);
    order[t].resize(per_thread);
    for (auto& r : order[t]) r = static_cast<uint32_t>(rng.below(rows));
  }
  std::vector<std::vector<float>> sums(o.threads, std::vector<float>(row_floats, 0.0f));
  double best = 0.0;
  for (int r = 0; r < o.repeats; ++r) {
    const double secs = timed_parallel(o.threads, [&](size_t t) {
      float* __restrict acc = sums[t].data();
      const std::vector<uint32_t>& rows_of_thread = order[t];
      for (size_t j = 0; j < rows_of_thread.size(); ++j) {
        // Rows a few iterations ahead are requested early, as a tuned gather kernel would: the probe
        // measures what the memory system gives to scattered rows, not the latency of one at a time.
        if (j + kAhead < rows_of_thread.size()) {
          const char* next = reinterpret_cast<const char*>(table.get() + size_t{rows_of_thread[j + kAhead]} * row_floats);
          for (size_t off = 0; off < o.row_bytes; off += 64) __builtin_prefetch(next + off);
        }
        const float* __restrict src = table.get() + size_t{rows_of_thread[j]} * row_floats;
        for (size_t c = 0; c < row_floats; ++c) acc[c] += src[c];
      }
    });
    best = std::max(best, static_cast<double>(o.row_bytes) * static_cast<double>(per_thread * o.threads) / secs);
  }
  for (const auto& s : sums) FRUGAL_CHECK(s[0] > 0.0f, "gather probe: nothing was read");
  return best;
}

}  // namespace

ProbeResult probe_machine(const ProbeOptions& options) {
  FRUGAL_CHECK(options.threads >= 1, "probe: threads must be >= 1");
  FRUGAL_CHECK(options.repeats >= 1, "probe: repeats must be >= 1");
  FRUGAL_CHECK(options.row_bytes >= sizeof(float) && options.row_bytes % sizeof(float) == 0,
               fmt::format("probe: row_bytes must be a positive multiple of 4, got {}", options.row_bytes));
  const FmaKernel k = best_fma();
  ProbeResult r;
  r.isa = k.isa;
  r.flops_per_s = probe_flops(options, k);
  r.stream_bytes_per_s = probe_stream(options);
  r.gather_bytes_per_s = probe_gather(options);
  return r;
}

}  // namespace frugal::kernels
