#include "kernels/lsh_ops.h"

#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
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

void dwta_one(const DwtaSpec& s, const float* v, uint32_t* codes, int32_t* winners) {
  const size_t bins = s.tables * s.k;
  const auto bin_size = static_cast<size_t>(s.bin_size);
  // Winner (position of the maximum) of every bin, or -1 when the bin holds no positive value.
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

void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) {
  const size_t bins = spec.tables * spec.k;
  FRUGAL_CHECK(spec.coords.size() == bins * spec.bin_size,
               fmt::format("DWTA: {} coordinates for {} bins of {}", spec.coords.size(), bins, spec.bin_size));
  for (const uint32_t c : spec.coords)
    FRUGAL_CHECK(c < x.cols(), fmt::format("DWTA: coordinate {} of {}-dimensional vectors", c, x.cols()));
  for_vectors(x, rows, [&](size_t j, const float* v) {
    int32_t winners_stack[1024];
    std::vector<int32_t> winners_heap;
    int32_t* winners = winners_stack;
    if (bins > 1024) {
      winners_heap.resize(bins);
      winners = winners_heap.data();
    }
    dwta_one(spec, v, codes + j * spec.tables, winners);
  });
}

}  // namespace frugal::kernels
