#include "layers/lsh/dwta.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::lsh {
DwtaFamily::DwtaFamily(const Dwta& options, size_t dim, size_t tables, uint64_t seed)
    : k_(options.k), bin_size_(options.bin_size), dim_(dim), tables_(tables), seed_(seed) {
  FRUGAL_CHECK(k_ >= 1 && k_ <= 16, fmt::format("DWTA: k must be in 1..16, got {}", k_));
  FRUGAL_CHECK(bin_size_ >= 2 && bin_size_ <= 256 && std::has_single_bit(static_cast<unsigned>(bin_size_)),
               fmt::format("DWTA: bin_size must be a power of two in 2..256, got {}", bin_size_));
  bin_bits_ = std::countr_zero(static_cast<unsigned>(bin_size_));
  FRUGAL_CHECK(options.bucket_bits >= 0 && options.bucket_bits <= kMaxBucketBits,
               fmt::format("DWTA: bucket_bits must be in 1..{} (0: from k), got {}", kMaxBucketBits,
                           options.bucket_bits));
  // Codes wider than bucket_bits_ are folded by the dwta_codes op (max_bucket_bits below).
  bucket_bits_ = std::min(k_ * bin_bits_, options.bucket_bits > 0 ? options.bucket_bits : kMaxBucketBits);
  Rng rng = Rng(seed).split(0xd3);
  coords_.resize(tables * k_ * bin_size_);
  for (auto& c : coords_) c = static_cast<uint32_t>(rng.below(dim));
}

void DwtaFamily::hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) const {
  FRUGAL_CHECK(x.cols() == dim_, fmt::format("DWTA: vectors have {} dimensions, the family {}", x.cols(), dim_));
  const bool device = !backend.device().is_host();
  if (device && placed_coords_.owner() != &backend) {
    placed_coords_ = Tensor(0, 0, Dtype::u32, backend);
    assign_values(placed_coords_, std::span<const uint32_t>(coords_));
  }
  backend.dwta_codes({.coords = coords_, .placed_coords = device ? &placed_coords_ : nullptr, .k = k_,
                      .bin_size = bin_size_, .bin_bits = bin_bits_, .bucket_bits = bucket_bits_,
                      .max_bucket_bits = bucket_bits_, .tables = tables_, .seed = seed_},
                     x, rows, codes);
  // Per vector and table: k bins of bin_size coordinates compared (counted as one operation each);
  // the coordinates and the vectors read once, the codes written.
  const double vectors = static_cast<double>(rows.empty() ? x.rows() : rows.size());
  const double compares = static_cast<double>(tables_) * k_ * bin_size_;
  profile::count_here(vectors * compares, 4.0 * (compares + vectors * static_cast<double>(dim_) +
                                                 vectors * static_cast<double>(tables_)));
}

}  // namespace frugal::lsh
