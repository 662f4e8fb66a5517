#include "kernels/lsh_ops.h"

#include <immintrin.h>

#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/active_extend.h"
#include "core/bucket_build.h"
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

// How many vectors a call hashes: the listed rows of x (each checked), or every row when `rows` is empty.
size_t vectors_to_hash(const Tensor& x, std::span<const uint32_t> rows) {
  for (const uint32_t r : rows)
    FRUGAL_CHECK(r < x.rows(), fmt::format("LSH: row {} of a {}-row matrix", r, x.rows()));
  return rows.empty() ? x.rows() : rows.size();
}

// body(j, row of x) for each listed row (every row when `rows` is empty).
template <class F>
void for_vectors(const Tensor& x, std::span<const uint32_t> rows, F&& body) {
  const size_t n = vectors_to_hash(x, rows);
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

// Vectors per block of the AVX2 winners.
constexpr size_t kLanes = 8;

// Bins b .. b + U - 1, side by side: each bin's compares form a chain (a compare waits for the last
// blend), and several chains keep the core busy where one would leave it waiting. (Their winners as
// block_winners_avx2 below says.)
template <size_t U>
__attribute__((target("avx2"))) void winners_of_bins(const DwtaSpec& s, const float* vt, size_t b, int32_t* winners) {
  const size_t bin_size = static_cast<size_t>(s.bin_size);
  const uint32_t* coords = s.coords.data() + b * bin_size;
  __m256 best[U], arg[U];
  for (size_t u = 0; u < U; ++u) {
    best[u] = _mm256_setzero_ps();
    arg[u] = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  }
  for (size_t j = 0; j < bin_size; ++j) {
    const __m256 jj = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(j)));
    for (size_t u = 0; u < U; ++u) {
      const __m256 x = _mm256_loadu_ps(vt + static_cast<size_t>(coords[u * bin_size + j]) * kLanes);
      const __m256 greater = _mm256_cmp_ps(x, best[u], _CMP_GT_OQ);
      best[u] = _mm256_blendv_ps(best[u], x, greater);
      arg[u] = _mm256_blendv_ps(arg[u], jj, greater);
    }
  }
  for (size_t u = 0; u < U; ++u)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(winners + (b + u) * kLanes), _mm256_castps_si256(arg[u]));
}

// The winners (position of the maximum, or -1 when the bin holds no positive value) of every bin for
// eight vectors at once. The block is transposed (vt[c * 8 + lane] = coordinate c of vector lane),
// so each coordinate of a bin is one load for all eight vectors, where a gather of eight
// coordinates of one vector costs several times more. Compare for compare the scalar loop's: a lane
// takes coordinate j when its value is strictly greater than the lane's best so far (which starts at
// 0), so ties keep the earlier coordinate, a NaN never wins and a bin with no positive value keeps -1.
// winners[b * 8 + lane] is bin b's winner for vector lane.
__attribute__((target("avx2"))) void block_winners_avx2(const DwtaSpec& s, const float* vt, int32_t* winners) {
  const size_t bins = s.tables * s.k;
  constexpr size_t kTogether = 4;
  size_t b = 0;
  for (; b + kTogether <= bins; b += kTogether) winners_of_bins<kTogether>(s, vt, b, winners);
  for (; b < bins; ++b) winners_of_bins<1>(s, vt, b, winners);
}

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

// The codes of L vectors from their bins' winners (bin b's winner for vector lane at
// winners[b * L + lane]); codes of the first `lanes` vectors written, vector after vector. The lanes
// go side by side (the compiler vectorizes the loops over them); a bin without a winner in any lane
// takes the per-lane path for that bin.
template <size_t L>
void codes_from_winners(const DwtaSpec& s, const int32_t* winners, size_t lanes, uint32_t* codes) {
  const size_t bins = s.tables * s.k;
  const bool fold = s.k * s.bin_bits > s.max_bucket_bits;
  for (size_t t = 0; t < s.tables; ++t) {
    uint64_t code[L] = {};
    for (int j = 0; j < s.k; ++j) {
      const size_t b = t * s.k + j;
      const int32_t* w = winners + b * L;
      bool empty = false;
      for (size_t lane = 0; lane < L; ++lane) empty |= w[lane] < 0;
      if (!empty) {
        for (size_t lane = 0; lane < L; ++lane) code[lane] = (code[lane] << s.bin_bits) | static_cast<uint64_t>(w[lane]);
        continue;
      }
      for (size_t lane = 0; lane < L; ++lane) {
        int32_t x = w[lane];
        // Densification: borrow the winner of a pseudo-randomly chosen bin, the same choice for
        // every vector, so two vectors agree on a borrowed code when they agree on the lender.
        for (int attempt = 1; x < 0 && attempt <= kMaxDensifyTries; ++attempt)
          x = winners[(mix32(s.seed ^ (b * 0x9e3779b97f4a7c15ULL) ^ static_cast<uint64_t>(attempt)) % bins) * L + lane];
        code[lane] = (code[lane] << s.bin_bits) | static_cast<uint64_t>(x < 0 ? 0 : x);
      }
    }
    for (size_t lane = 0; lane < lanes; ++lane)
      codes[lane * s.tables + t] = fold ? mix32(code[lane] * 0x9e3779b97f4a7c15ULL + t) & ((1u << s.bucket_bits) - 1)
                                        : static_cast<uint32_t>(code[lane]);
  }
}

// The scalar loop, one vector.
void dwta_one(const DwtaSpec& s, const float* v, uint32_t* codes, int32_t* winners) {
  const size_t bins = s.tables * s.k;
  const auto bin_size = static_cast<size_t>(s.bin_size);
  for (size_t b = 0; b < bins; ++b) {
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
  codes_from_winners<1>(s, winners, 1, codes);
}

// The per-sample lists (and logit offsets) one after another into out's host tensors.
void concatenate(const std::vector<std::vector<uint32_t>>& per_sample,
                 const std::vector<std::vector<float>>* per_sample_offsets, ActiveTensors& out) {
  const size_t b = per_sample.size();
  size_t total = 0;
  for (const auto& a : per_sample) total += a.size();
  out.offsets.resize(1, b + 1);
  out.ids.resize(1, total);
  out.logit_offsets.resize(1, per_sample_offsets != nullptr ? total : 0);
  uint64_t* offsets = out.offsets.u64().data();
  uint32_t* ids = out.ids.u32().data();
  offsets[0] = 0;
  for (size_t i = 0; i < b; ++i) {
    std::copy(per_sample[i].begin(), per_sample[i].end(), ids + offsets[i]);
    if (per_sample_offsets != nullptr)
      std::copy((*per_sample_offsets)[i].begin(), (*per_sample_offsets)[i].end(), out.logit_offsets.data() + offsets[i]);
    offsets[i + 1] = offsets[i] + per_sample[i].size();
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
  const size_t bins = spec.tables * spec.k, dim = x.cols();
  FRUGAL_CHECK(spec.coords.size() == bins * spec.bin_size,
               fmt::format("DWTA: {} coordinates for {} bins of {}", spec.coords.size(), bins, spec.bin_size));
  for (const uint32_t c : spec.coords)
    FRUGAL_CHECK(c < dim, fmt::format("DWTA: coordinate {} of {}-dimensional vectors", c, dim));
  if (!(vectorized && cpu_has_avx2())) {
    for_vectors(x, rows, [&](size_t j, const float* v) {
      thread_local std::vector<int32_t> winners;  // every bin's winner, reused from vector to vector
      winners.resize(bins);
      dwta_one(spec, v, codes + j * spec.tables, winners.data());
    });
    return;
  }
  const size_t n = vectors_to_hash(x, rows);
  const size_t blocks = (n + kLanes - 1) / kLanes;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, blocks, 4), [&](const auto& range) {
    std::vector<float> vt(dim * kLanes);  // the block's vectors, transposed
    std::vector<int32_t> winners(bins * kLanes);
    for (size_t block = range.begin(); block < range.end(); ++block) {
      const size_t first = block * kLanes, lanes = std::min(kLanes, n - first);
      for (size_t lane = 0; lane < kLanes; ++lane) {
        if (lane >= lanes) {  // a last block of fewer vectors: the spare lanes compare zeros, unused
          for (size_t c = 0; c < dim; ++c) vt[c * kLanes + lane] = 0.0f;
          continue;
        }
        const size_t j = first + lane;
        const float* v = x.row(rows.empty() ? j : rows[j]);
        for (size_t c = 0; c < dim; ++c) vt[c * kLanes + lane] = v[c];
      }
      block_winners_avx2(spec, vt.data(), winners.data());
      codes_from_winners<kLanes>(spec, winners.data(), lanes, codes + first * spec.tables);
    }
  });
}

void bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveTensors& out) {
  q.validate(tables);
  const size_t b = q.samples, nt = tables.num_tables();
  FRUGAL_CHECK(nt < 0xffff, fmt::format("bucket_union: {} tables, at most 65,534", nt));
  // A neuron's hits: how many of the sample's tables returned it; kLabel marks the sample's labels.
  constexpr uint16_t kLabel = 0xffff;
  constexpr size_t kAhead = 8;
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
        // Each table's bucket bounds and ids are a cache miss each (the bounds of all tables span
        // megabytes): the bounds are fetched kAhead tables ahead, the ids half as far, by when their
        // bounds have arrived.
        if (t + kAhead < nt) __builtin_prefetch(&tables.offsets[t + kAhead][codes[t + kAhead]], 0);
        if (t + kAhead / 2 < nt) {
          const size_t u = t + kAhead / 2;
          __builtin_prefetch(tables.ids[u].data() + tables.offsets[u][codes[u]], 0);
        }
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
  concatenate(per_sample, nullptr, out);
}

void bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids) {
  FRUGAL_CHECK(b.codes != nullptr && b.codes->dtype() == Dtype::u32,
               "bucket_build: the codes must be a u32 tensor (neurons x tables)");
  FRUGAL_CHECK(b.buckets >= 1 && b.capacity >= 1,
               fmt::format("bucket_build: {} buckets of capacity {}", b.buckets, b.capacity));
  const size_t n = b.codes->rows(), nt = b.codes->cols(), stride = size_t{b.buckets} + 1;
  FRUGAL_CHECK(n < 0xffffffffu, fmt::format("bucket_build: {} neurons, beyond 32-bit ids", n));
  const std::span<const uint32_t> codes = b.codes->u32();
  for (size_t e = 0; e < codes.size(); ++e)
    FRUGAL_CHECK(codes[e] < b.buckets, fmt::format("bucket_build: neuron {}'s code {} in table {} is not below the {} "
                                                   "buckets", e / nt, codes[e], e % nt, b.buckets));
  offsets.resize(nt, stride);
  ids.resize(nt, n);
  tbb::parallel_for(size_t{0}, nt, [&](size_t t) {
    std::vector<uint32_t> aside;
    bucket_build::build_table([&codes, nt, t](uint64_t i) { return codes[i * nt + t]; }, n, b.buckets, b.capacity,
                              b.seed, t, offsets.u32().data() + t * stride, ids.u32().data() + t * n, aside);
  });
}

void active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out) {
  e.validate();
  const ActiveView sets = in.host();
  const size_t b = sets.num_samples(), neurons = e.neurons;
  const active_extend::Spec spec{
      .rng_state = e.rng_state, .neurons = neurons, .min_active = e.min_active, .cap = e.cap, .draws = e.draws,
      .logq = e.logq, .threshold = e.draws > 0 ? e.threshold->data() : nullptr,
      .alias = e.draws > 0 ? e.alias->u32().data() : nullptr, .log_prob = e.draws > 0 ? e.log_prob->f64().data() : nullptr,
      .log_count = e.draws > 0 ? e.log_count->f64().data() : nullptr};
  for (const uint32_t id : sets.ids)
    FRUGAL_CHECK(id < neurons, fmt::format("active_extend: id {} of {} neurons", id, neurons));
  // Per thread, a mark per neuron (all 0 between samples): a membership test costs one read.
  struct Scratch {
    std::vector<uint8_t> member;
    std::vector<uint32_t> drawn;
  };
  static tbb::enumerable_thread_specific<Scratch> scratch;
  std::vector<std::vector<uint32_t>> per_sample(b);
  std::vector<std::vector<float>> per_sample_offsets(e.draws > 0 ? b : 0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 1), [&](const auto& range) {
    Scratch& s = scratch.local();
    if (s.member.size() < neurons) s.member.resize(neurons, 0);
    s.drawn.resize(e.draws);
    for (size_t i = range.begin(); i < range.end(); ++i) {
      const uint64_t first = sets.offsets[i], n = sets.offsets[i + 1] - first;
      std::vector<uint32_t>& active = per_sample[i];
      active.resize(active_extend::room_needed(spec, n));
      std::copy_n(sets.ids.begin() + static_cast<std::ptrdiff_t>(first), n, active.begin());
      float* offsets = nullptr;
      if (e.draws > 0) {
        per_sample_offsets[i].resize(active.size());
        offsets = per_sample_offsets[i].data();
      }
      for (uint64_t j = 0; j < n; ++j) s.member[active[j]] = 1;
      // Every id found not to be a member joins the set next (extend()'s contract): marked then.
      const uint64_t size = active_extend::extend(
          spec, i, active.data(), n, offsets, s.drawn.data(),
          [&](uint32_t id, uint64_t) {
            if (s.member[id] != 0) return true;
            s.member[id] = 1;
            return false;
          },
          [](uint32_t* v, uint64_t m) { std::sort(v, v + m); });
      for (uint64_t j = 0; j < size; ++j) s.member[active[j]] = 0;
      active.resize(size);
      if (e.draws > 0) per_sample_offsets[i].resize(size);
    }
  });
  concatenate(per_sample, e.draws > 0 ? &per_sample_offsets : nullptr, out);
}

}  // namespace frugal::kernels
