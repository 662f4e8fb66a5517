#include "kernels/lsh_ops.h"

#include <immintrin.h>

#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "kernels/vector_ops.h"

namespace frugal::kernels {
namespace {

constexpr int kMaxDensifyTries = 64;

uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// body(j, row of x) for each listed row (every row when `rows` is empty).
template <class F>
void for_vectors(const Tensor& x, std::span<const uint32_t> rows, F&& body) {
  const size_t n = rows.empty() ? x.rows() : rows.size();
  for (const uint32_t r : rows)
    FRUGAL_CHECK(r < x.rows(), fmt::format("LSH: row {} of a {}-row matrix", r, x.rows()));
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 16), [&](const auto& range) {
    for (size_t j = range.begin(); j < range.end(); ++j) body(j, x.row(rows.empty() ? j : rows[j]));
  });
}

void simhash_one(const SimHashSpec& s, const float* v, size_t dim, uint32_t* codes) {
  for (size_t t = 0; t < s.tables; ++t) {
    uint32_t code = 0;
    for (int b = 0; b < s.k; ++b)
      code = (code << 1) | (dot(s.planes->row(t * s.k + b), v, dim) > 0.0f ? 1u : 0u);
    codes[t] = code;
  }
}

// Bins per vector group of the AVX2 winners.
constexpr size_t kLanes = 8;

// The coordinates of groups of eight bins, transposed so that one load gives the j-th coordinate of
// each: grouped[g * bin_size * 8 + j * 8 + lane] = coords[(g * 8 + lane) * bin_size + j].
std::vector<int32_t> grouped_coords(const DwtaSpec& s) {
  const size_t bins = s.tables * s.k, groups = bins / kLanes, bin_size = static_cast<size_t>(s.bin_size);
  std::vector<int32_t> grouped(groups * bin_size * kLanes);
  for (size_t g = 0; g < groups; ++g)
    for (size_t j = 0; j < bin_size; ++j)
      for (size_t lane = 0; lane < kLanes; ++lane)
        grouped[(g * bin_size + j) * kLanes + lane] = static_cast<int32_t>(s.coords[(g * kLanes + lane) * bin_size + j]);
  return grouped;
}

// The scalar loop's winners, eight bins per step: a lane takes coordinate j when its value is
// strictly greater than the lane's best so far (which starts at 0), so ties keep the earlier
// coordinate, a NaN never wins and a bin with no positive value keeps -1.
__attribute__((target("avx2"))) void group_winners_avx2(const float* v, const int32_t* grouped, size_t groups,
                                                        int bin_size, int32_t* winners) {
  for (size_t g = 0; g < groups; ++g) {
    const int32_t* c = grouped + g * static_cast<size_t>(bin_size) * kLanes;
    __m256 best = _mm256_setzero_ps();
    __m256 arg = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int j = 0; j < bin_size; ++j) {
      const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + static_cast<size_t>(j) * kLanes));
      const __m256 x = _mm256_i32gather_ps(v, idx, 4);
      const __m256 greater = _mm256_cmp_ps(x, best, _CMP_GT_OQ);
      best = _mm256_blendv_ps(best, x, greater);
      arg = _mm256_blendv_ps(arg, _mm256_castsi256_ps(_mm256_set1_epi32(j)), greater);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(winners + g * kLanes), _mm256_castps_si256(arg));
  }
}

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

// `grouped`: grouped_coords(s) to take the AVX2 path for whole groups of eight bins, or empty.
void dwta_one(const DwtaSpec& s, const float* v, uint32_t* codes, int32_t* winners, std::span<const int32_t> grouped) {
  const size_t bins = s.tables * s.k;
  const auto bin_size = static_cast<size_t>(s.bin_size);
  size_t first_scalar = 0;
  if (!grouped.empty()) {
    const size_t groups = bins / kLanes;
    group_winners_avx2(v, grouped.data(), groups, s.bin_size, winners);
    first_scalar = groups * kLanes;
  }
  // Winner (position of the maximum) of every bin, or -1 when the bin holds no positive value.
  for (size_t b = first_scalar; b < bins; ++b) {
    const uint32_t* c = &s.coords[b * bin_size];
    float best = 0.0f;
    int32_t arg = -1;
    for (int j = 0; j < s.bin_size; ++j)
      if (v[c[j]] > best) {
        best = v[c[j]];
        arg = j;
      }
    winners[b] = arg;
  }
  for (size_t t = 0; t < s.tables; ++t) {
    uint64_t code = 0;
    for (int j = 0; j < s.k; ++j) {
      const size_t b = t * s.k + j;
      int32_t w = winners[b];
      // Densification: borrow the winner of a pseudo-randomly chosen bin, the same choice for every
      // vector, so two vectors agree on a borrowed code when they agree on the lender.
      for (int attempt = 1; w < 0 && attempt <= kMaxDensifyTries; ++attempt)
        w = winners[mix32(s.seed ^ (b * 0x9e3779b97f4a7c15ULL) ^ static_cast<uint64_t>(attempt)) % bins];
      code = (code << s.bin_bits) | static_cast<uint64_t>(w < 0 ? 0 : w);
    }
    codes[t] = (s.k * s.bin_bits <= s.max_bucket_bits)
                   ? static_cast<uint32_t>(code)
                   : mix32(code * 0x9e3779b97f4a7c15ULL + t) & ((1u << s.bucket_bits) - 1);
  }
}

}  // namespace

void simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) {
  FRUGAL_CHECK(spec.planes != nullptr && spec.planes->rows() == spec.tables * spec.k &&
                   spec.planes->cols() == x.cols(),
               fmt::format("SimHash: {} x {} planes for {} tables of {} bits over {} dimensions",
                           spec.planes == nullptr ? 0 : spec.planes->rows(),
                           spec.planes == nullptr ? 0 : spec.planes->cols(), spec.tables, spec.k, x.cols()));
  const size_t dim = x.cols();
  for_vectors(x, rows, [&](size_t j, const float* v) { simhash_one(spec, v, dim, codes + j * spec.tables); });
}

void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes,
                bool vectorized) {
  const size_t bins = spec.tables * spec.k;
  FRUGAL_CHECK(spec.coords.size() == bins * spec.bin_size,
               fmt::format("DWTA: {} coordinates for {} bins of {}", spec.coords.size(), bins, spec.bin_size));
  for (const uint32_t c : spec.coords)
    FRUGAL_CHECK(c < x.cols(), fmt::format("DWTA: coordinate {} of {}-dimensional vectors", c, x.cols()));
  const std::vector<int32_t> grouped =
      vectorized && cpu_has_avx2() && x.cols() <= size_t{INT32_MAX} ? grouped_coords(spec) : std::vector<int32_t>{};
  for_vectors(x, rows, [&](size_t j, const float* v) {
    int32_t winners_stack[1024];
    std::vector<int32_t> winners_heap;
    int32_t* winners = winners_stack;
    if (bins > 1024) {
      winners_heap.resize(bins);
      winners = winners_heap.data();
    }
    dwta_one(spec, v, codes + j * spec.tables, winners, grouped);
  });
}

void bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveSets& out) {
  q.validate(tables);
  const size_t b = q.samples, nt = tables.num_tables();
  FRUGAL_CHECK(nt < 0xffff, fmt::format("bucket_union: {} tables, at most 65,534", nt));
  // A neuron's hits: how many of the sample's tables returned it; kLabel marks the sample's labels.
  constexpr uint16_t kLabel = 0xffff;
  struct Scratch {
    std::vector<uint16_t> hits;
    std::vector<uint32_t> found;
  };
  static tbb::enumerable_thread_specific<Scratch> scratch;
  const size_t neurons = tables.neurons;
  std::vector<std::vector<uint32_t>> per_sample(b);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 1), [&](const auto& range) {
    Scratch& s = scratch.local();
    if (s.hits.size() < neurons) s.hits.resize(neurons, 0);
    for (size_t i = range.begin(); i < range.end(); ++i) {
      std::vector<uint32_t>& active = per_sample[i];
      active.assign(q.labels.begin() + static_cast<std::ptrdiff_t>(q.label_offsets[i]),
                    q.labels.begin() + static_cast<std::ptrdiff_t>(q.label_offsets[i + 1]));
      for (const uint32_t l : active) s.hits[l] = kLabel;
      const uint32_t* codes = q.codes + i * nt;
      uint64_t scanned = 0;
      s.found.clear();
      for (size_t t = 0; t < nt; ++t) {
        const auto& offsets = tables.offsets[t];
        const uint32_t* ids = tables.ids[t].data();
        scanned += offsets[codes[t] + 1] - offsets[codes[t]];
        for (uint32_t e = offsets[codes[t]]; e < offsets[codes[t] + 1]; ++e) {
          const uint32_t n = ids[e];
          if (s.hits[n] == kLabel) continue;
          if (s.hits[n]++ == 0) s.found.push_back(n);
        }
      }
      if (q.scanned != nullptr) q.scanned[i] = scanned;
      const size_t labels = active.size();
      if (q.cap > 0 && labels + s.found.size() > q.cap) {
        const size_t keep = q.cap > labels ? q.cap - labels : 0;
        std::partial_sort(s.found.begin(), s.found.begin() + static_cast<std::ptrdiff_t>(keep), s.found.end(),
                          [&](uint32_t a, uint32_t c) { return s.hits[a] != s.hits[c] ? s.hits[a] > s.hits[c] : a < c; });
        for (const uint32_t n : s.found) s.hits[n] = 0;
        s.found.resize(keep);
      } else {
        for (const uint32_t n : s.found) s.hits[n] = 0;
      }
      // No sort: the union is already in a deterministic order (tables, then bucket order).
      active.insert(active.end(), s.found.begin(), s.found.end());
      for (size_t l = 0; l < labels; ++l) s.hits[active[l]] = 0;
    }
  });
  out.clear();
  size_t total = 0;
  for (const auto& a : per_sample) total += a.size();
  out.ids.reserve(total);
  out.offsets.reserve(b + 1);
  for (const auto& a : per_sample) {
    out.ids.insert(out.ids.end(), a.begin(), a.end());
    out.offsets.push_back(out.ids.size());
  }
}

}  // namespace frugal::kernels
