#include "layers/lsh/hash_family.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "layers/lsh/dwta.h"
#include "layers/lsh/simhash.h"

namespace frugal::lsh {

std::string family_name(const Family& f) {
  if (const auto* d = std::get_if<Dwta>(&f)) {
    const int code_bits = d->k * std::countr_zero(static_cast<unsigned>(d->bin_size));
    if (d->bucket_bits > 0 && d->bucket_bits < code_bits)
      return fmt::format("dwta(k={}, bin={}, buckets=2^{})", d->k, d->bin_size, d->bucket_bits);
    return fmt::format("dwta(k={}, bin={})", d->k, d->bin_size);
  }
  return fmt::format("simhash(k={})", std::get<SimHash>(f).k);
}

size_t default_active_target(size_t neurons) {
  const auto share = static_cast<size_t>(std::llround(0.015 * static_cast<double>(neurons)));
  return std::clamp(share, kMinDefaultActive, kMaxDefaultActive);
}

Family auto_family(Family f, size_t tables, size_t neurons, size_t active_target) {
  const double target = static_cast<double>(active_target > 0 ? active_target : default_active_target(neurons));
  // floor: the expected set is between the target and twice it, never below (recall first).
  const double bits = std::log2(std::max(2.0, static_cast<double>(tables) * static_cast<double>(neurons) / target));
  const int b = std::clamp(static_cast<int>(std::floor(bits)), 1, kMaxBucketBits);
  if (auto* d = std::get_if<Dwta>(&f)) {
    const int per_bin = std::countr_zero(static_cast<unsigned>(d->bin_size));
    d->k = std::clamp((b + per_bin - 1) / std::max(per_bin, 1), 1, 16);
    d->bucket_bits = std::min(b, d->k * per_bin);
  } else {
    std::get<SimHash>(f).k = b;
  }
  return f;
}

std::unique_ptr<HashFamily> HashFamily::create(const Family& family, size_t dim, size_t tables, uint64_t seed) {
  FRUGAL_CHECK(dim > 0, "LSH: vectors must have at least one dimension");
  FRUGAL_CHECK(tables > 0 && tables <= 4096, fmt::format("LSH: tables must be in 1..4096, got {}", tables));
  if (const auto* d = std::get_if<Dwta>(&family)) return std::make_unique<DwtaFamily>(*d, dim, tables, seed);
  return std::make_unique<SimHashFamily>(std::get<SimHash>(family), dim, tables, seed);
}

}  // namespace frugal::lsh
