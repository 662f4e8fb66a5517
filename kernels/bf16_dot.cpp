#include "kernels/bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <immintrin.h>

#include "core/check.h"
#include "core/tensor.h"
#include "kernels/vector_ops.h"

// Only the functions below carry the AVX-512 targets (the rest of the build stays portable); they
// run only after bf16_dot_available() said yes.
#define FRUGAL_BF16_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))

namespace frugal::kernels {
namespace {

std::atomic<Bf16Dot> g_mode{Bf16Dot::auto_};

constexpr size_t kPair = 32;  // bf16 values one instruction reads from each operand

inline __mmask16 mask16(size_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }
inline __mmask32 mask32(size_t left) { return left >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << left) - 1); }

// The 16 lanes summed in a fixed order (halves, quarters, pairs, neighbours). The masked forms of
// the shuffles: GCC 12's unmasked ones read an uninitialized register (a -Wmaybe-uninitialized
// error under -Werror), whatever the result.
FRUGAL_BF16_TARGET inline float sum_lanes(__m512 v) {
  constexpr __mmask16 all = 0xffff;
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0x4e));
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0xb1));
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0x4e));
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0xb1));
  return _mm512_cvtss_f32(v);
}

// a rounded to bf16 (to nearest, ties to even) into out, zero-padded to a multiple of kPair.
FRUGAL_BF16_TARGET void round_padded(const float* a, size_t n, uint16_t* out) {
  for (size_t c = 0; c < n; c += kPair) {
    const __m512 lo = _mm512_maskz_loadu_ps(mask16(n - c), a + c);
    const __m512 hi = _mm512_maskz_loadu_ps(mask16(n - c > 16 ? n - c - 16 : 0), a + std::min(n, c + 16));
    _mm512_storeu_si512(out + c, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

// Rows rows[0..Rows) against the rounded activation ab (padded): one chain of sums per row, the
// last (partial) chunk read under a mask.
template <size_t Rows>
FRUGAL_BF16_TARGET inline void dot_group(const uint16_t* ab, const uint16_t* const* rows, size_t n, float* out) {
  __m512 acc[Rows];
  for (size_t j = 0; j < Rows; ++j) acc[j] = _mm512_setzero_ps();
  size_t c = 0;
  for (; c + kPair <= n; c += kPair) {
    const __m512bh x = (__m512bh)_mm512_loadu_si512(ab + c);
    for (size_t j = 0; j < Rows; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, (__m512bh)_mm512_loadu_si512(rows[j] + c));
  }
  if (c < n) {
    const __mmask32 m = mask32(n - c);
    const __m512bh x = (__m512bh)_mm512_loadu_si512(ab + c);
    for (size_t j = 0; j < Rows; ++j)
      acc[j] = _mm512_dpbf16_ps(acc[j], x, (__m512bh)_mm512_maskz_loadu_epi16(m, rows[j] + c));
  }
  for (size_t j = 0; j < Rows; ++j) out[j] = sum_lanes(acc[j]);
}

// One column block [c0, c0 + 32 * Chunks) of axpy_rows_bf16 (its last chunk cut at n), the sums
// held in registers over all rows. Lane t of 128-bit quarter q of lo[k] sums column 32k + 8q + t of
// the block, of hi[k] column 32k + 8q + 4 + t: what unpacklo/unpackhi of two rows' elements give.
// The loops over k are unrolled early (the pragma), so that the sums become registers; otherwise
// GCC 12 keeps the arrays in memory and stores all of them after every pair of rows.
template <size_t Chunks>
FRUGAL_BF16_TARGET void axpy_block(const float* alpha, const uint16_t* w, size_t ld, const uint32_t* ids,
                                   size_t count, size_t c0, size_t n, float* y) {
  __m512 lo[Chunks], hi[Chunks];
  _Pragma("GCC unroll 16") for (size_t k = 0; k < Chunks; ++k) lo[k] = hi[k] = _mm512_setzero_ps();
  const __mmask32 last = mask32(n - (c0 + (Chunks - 1) * kPair));  // the last chunk's columns
  const size_t block_bytes = std::min(n - c0, Chunks * kPair) * sizeof(uint16_t);
  size_t fetched = 0;  // rows [0, fetched) have been asked for
  size_t e0 = 0;
  while (e0 < count && alpha[e0] == 0.0f) ++e0;
  while (e0 < count) {
    size_t e1 = e0 + 1;
    while (e1 < count && alpha[e1] == 0.0f) ++e1;
    for (const size_t end = std::min(e1 + 1 + kPrefetchRows, count); fetched < end; ++fetched)
      prefetch_bytes(w + ids[fetched] * ld + c0, block_bytes);
    // A last row without a partner pairs with zeros: its partner's loads are masked off entirely.
    const bool two = e1 < count;
    const __mmask32 both = two ? __mmask32(0xffffffffu) : __mmask32(0);
    const uint16_t* r0 = w + ids[e0] * ld + c0;
    const uint16_t* r1 = two ? w + ids[e1] * ld + c0 : r0;
    // (alpha[e0], alpha[e1]) as a bf16 pair in every 32-bit lane: lane c gets a0 * r0[c] + a1 * r1[c].
    const uint32_t pair = f32_to_bf16(alpha[e0]) | (two ? uint32_t{f32_to_bf16(alpha[e1])} << 16 : 0u);
    const __m512bh coef = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
    _Pragma("GCC unroll 16") for (size_t k = 0; k < Chunks; ++k) {
      const __mmask32 m = k + 1 < Chunks ? __mmask32(0xffffffffu) : last;
      const __m512i a = _mm512_maskz_loadu_epi16(m, r0 + k * kPair);
      const __m512i b = _mm512_maskz_loadu_epi16(m & both, r1 + k * kPair);
      lo[k] = _mm512_dpbf16_ps(lo[k], (__m512bh)_mm512_unpacklo_epi16(a, b), coef);
      hi[k] = _mm512_dpbf16_ps(hi[k], (__m512bh)_mm512_unpackhi_epi16(a, b), coef);
    }
    e0 = e1 + 1;
    while (e0 < count && alpha[e0] == 0.0f) ++e0;
  }
  // Back to column order, added to y.
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  _Pragma("GCC unroll 16") for (size_t k = 0; k < Chunks; ++k) {
    const size_t c = c0 + k * kPair;
    const __mmask16 m0 = mask16(n - c), m1 = mask16(n - c > 16 ? n - c - 16 : 0);
    float* y1 = y + std::min(n, c + 16);
    _mm512_mask_storeu_ps(y + c, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, y + c),
                                                   _mm512_permutex2var_ps(lo[k], first, hi[k])));
    _mm512_mask_storeu_ps(y1, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, y1),
                                                _mm512_permutex2var_ps(lo[k], second, hi[k])));
  }
}

}  // namespace

bool bf16_dot_available() {
  static const bool ok = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

void set_bf16_dot(Bf16Dot mode) {
  FRUGAL_CHECK(mode != Bf16Dot::on || bf16_dot_available(),
               "bf16 dot products 'on': this CPU has no AVX512-BF16 (vdpbf16ps); use 'auto' or 'off'");
  g_mode.store(mode, std::memory_order_relaxed);
}

Bf16Dot bf16_dot() { return g_mode.load(std::memory_order_relaxed); }

bool bf16_dot_active() {
  switch (bf16_dot()) {
    case Bf16Dot::on: return true;
    case Bf16Dot::off: return false;
    case Bf16Dot::auto_: break;
  }
  return bf16_dot_available();
}

Bf16Dot bf16_dot_from_string(std::string_view text) {
  for (const Bf16Dot mode : {Bf16Dot::auto_, Bf16Dot::on, Bf16Dot::off})
    if (text == bf16_dot_name(mode)) return mode;
  FRUGAL_CHECK(false, fmt::format("bf16 dot products: '{}' not in {{auto,on,off}}", text));
  return Bf16Dot::auto_;
}

std::string_view bf16_dot_name(Bf16Dot mode) {
  switch (mode) {
    case Bf16Dot::on: return "on";
    case Bf16Dot::off: return "off";
    case Bf16Dot::auto_: break;
  }
  return "auto";
}

FRUGAL_BF16_TARGET void dot_rows_bf16(const float* a, const uint16_t* w, size_t ld, const uint32_t* ids,
                                      size_t count, size_t n, float* out) {
  // The activation rounded once for all the rows, per thread (no allocation per call).
  thread_local std::vector<uint16_t> rounded;
  rounded.resize((n + kPair - 1) / kPair * kPair);
  round_padded(a, n, rounded.data());
  constexpr size_t kTogether = 4;  // independent chains: one row's chain of adds bounds the time
  const size_t bytes = n * sizeof(uint16_t);
  size_t e = 0;
  for (; e + kTogether <= count; e += kTogether) {
    for (size_t p = e + kPrefetchRows; p < std::min(e + kPrefetchRows + kTogether, count); ++p)
      prefetch_bytes(w + ids[p] * ld, bytes);
    const uint16_t* rows[kTogether];
    for (size_t j = 0; j < kTogether; ++j) rows[j] = w + ids[e + j] * ld;
    dot_group<kTogether>(rounded.data(), rows, n, out + e);
  }
  for (; e < count; ++e) {
    const uint16_t* rows[1] = {w + ids[e] * ld};
    dot_group<1>(rounded.data(), rows, n, out + e);
  }
}

FRUGAL_BF16_TARGET void axpy_rows_bf16(const float* alpha, const uint16_t* w, size_t ld, const uint32_t* ids,
                                       size_t count, size_t n, float* y) {
  // Blocks of up to 256 columns: 16 sums in registers, every row read once per block.
  constexpr size_t kMaxChunks = 8;
  for (size_t c0 = 0; c0 < n; c0 += kMaxChunks * kPair) {
    switch (std::min(kMaxChunks, (n - c0 + kPair - 1) / kPair)) {
      case 1: axpy_block<1>(alpha, w, ld, ids, count, c0, n, y); break;
      case 2: axpy_block<2>(alpha, w, ld, ids, count, c0, n, y); break;
      case 3: axpy_block<3>(alpha, w, ld, ids, count, c0, n, y); break;
      case 4: axpy_block<4>(alpha, w, ld, ids, count, c0, n, y); break;
      case 5: axpy_block<5>(alpha, w, ld, ids, count, c0, n, y); break;
      case 6: axpy_block<6>(alpha, w, ld, ids, count, c0, n, y); break;
      case 7: axpy_block<7>(alpha, w, ld, ids, count, c0, n, y); break;
      default: axpy_block<8>(alpha, w, ld, ids, count, c0, n, y); break;
    }
  }
}

}  // namespace frugal::kernels
