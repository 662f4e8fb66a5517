#include "layers/lsh/dwta.h"

#include <bit>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::lsh {
namespace {
// Tables wider than this fold their code by hashing: keeps each table's offsets array small.
constexpr int kMaxBucketBits = 18;
constexpr int kMaxDensifyTries = 64;

uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
}  // namespace

DwtaFamily::DwtaFamily(const Dwta& options, size_t dim, size_t tables, uint64_t seed)
    : k_(options.k), bin_size_(options.bin_size), dim_(dim), tables_(tables), seed_(seed) {
  FRUGAL_CHECK(k_ >= 1 && k_ <= 16, fmt::format("DWTA: k must be in 1..16, got {}", k_));
  FRUGAL_CHECK(bin_size_ >= 2 && bin_size_ <= 256 && std::has_single_bit(static_cast<unsigned>(bin_size_)),
               fmt::format("DWTA: bin_size must be a power of two in 2..256, got {}", bin_size_));
  bin_bits_ = std::countr_zero(static_cast<unsigned>(bin_size_));
  bucket_bits_ = std::min(k_ * bin_bits_, kMaxBucketBits);
  Rng rng = Rng(seed).split(0xd3);
  coords_.resize(tables * k_ * bin_size_);
  for (auto& c : coords_) c = static_cast<uint32_t>(rng.below(dim));
}

void DwtaFamily::hash(const float* v, uint32_t* codes) const {
  const size_t bins = tables_ * k_;
  // Winner (position of the maximum) of every bin, or -1 when the bin holds no positive value.
  int32_t winners_stack[1024];
  std::vector<int32_t> winners_heap;
  int32_t* winners = winners_stack;
  if (bins > 1024) {
    winners_heap.resize(bins);
    winners = winners_heap.data();
  }
  for (size_t b = 0; b < bins; ++b) {
    const uint32_t* c = &coords_[b * bin_size_];
    float best = 0.0f;
    int32_t arg = -1;
    for (int j = 0; j < bin_size_; ++j)
      if (v[c[j]] > best) {
        best = v[c[j]];
        arg = j;
      }
    winners[b] = arg;
  }
  for (size_t t = 0; t < tables_; ++t) {
    uint64_t code = 0;
    for (int j = 0; j < k_; ++j) {
      const size_t b = t * k_ + j;
      int32_t w = winners[b];
      // Densification: borrow the winner of a pseudo-randomly chosen bin, the same choice for every
      // vector, so two vectors agree on a borrowed code when they agree on the lender.
      for (int attempt = 1; w < 0 && attempt <= kMaxDensifyTries; ++attempt)
        w = winners[mix32(seed_ ^ (b * 0x9e3779b97f4a7c15ULL) ^ static_cast<uint64_t>(attempt)) % bins];
      code = (code << bin_bits_) | static_cast<uint64_t>(w < 0 ? 0 : w);
    }
    codes[t] = (k_ * bin_bits_ <= kMaxBucketBits) ? static_cast<uint32_t>(code)
                                                  : mix32(code * 0x9e3779b97f4a7c15ULL + t) & ((1u << bucket_bits_) - 1);
  }
}

}  // namespace frugal::lsh
