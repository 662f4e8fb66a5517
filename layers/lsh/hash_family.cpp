#include "layers/lsh/hash_family.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "layers/lsh/dwta.h"
#include "layers/lsh/simhash.h"

namespace frugal::lsh {

std::string family_name(const Family& f) {
  if (const auto* d = std::get_if<Dwta>(&f)) return fmt::format("dwta(k={}, bin={})", d->k, d->bin_size);
  return fmt::format("simhash(k={})", std::get<SimHash>(f).k);
}

int default_k(const Family& f, size_t tables, size_t neurons) {
  const double target = std::max(256.0, 0.015 * static_cast<double>(neurons));
  const double bits = std::log2(std::max(2.0, static_cast<double>(tables) * neurons / target));
  if (const auto* d = std::get_if<Dwta>(&f)) {
    const double per_bin = std::log2(static_cast<double>(d->bin_size));
    return std::clamp(static_cast<int>(std::lround(bits / per_bin)), 1, 16);
  }
  return std::clamp(static_cast<int>(std::lround(bits)), 1, 24);
}

std::unique_ptr<HashFamily> HashFamily::create(const Family& family, size_t dim, size_t tables, uint64_t seed) {
  FRUGAL_CHECK(dim > 0, "LSH: vectors must have at least one dimension");
  FRUGAL_CHECK(tables > 0 && tables <= 4096, fmt::format("LSH: tables must be in 1..4096, got {}", tables));
  if (const auto* d = std::get_if<Dwta>(&family)) return std::make_unique<DwtaFamily>(*d, dim, tables, seed);
  return std::make_unique<SimHashFamily>(std::get<SimHash>(family), dim, tables, seed);
}

}  // namespace frugal::lsh
