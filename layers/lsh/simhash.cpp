#include "layers/lsh/simhash.h"

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::lsh {

SimHashFamily::SimHashFamily(const SimHash& options, size_t dim, size_t tables, uint64_t seed)
    : k_(options.k), dim_(dim), tables_(tables), planes_(tables * options.k, dim) {
  FRUGAL_CHECK(k_ >= 1 && k_ <= 24, fmt::format("SimHash: k must be in 1..24, got {}", k_));
  Rng rng = Rng(seed).split(0x51);
  for (size_t i = 0; i < planes_.size(); ++i) planes_.data()[i] = rng.normal();
}

void SimHashFamily::hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) const {
  FRUGAL_CHECK(x.cols() == dim_, fmt::format("SimHash: vectors have {} dimensions, the planes {}", x.cols(), dim_));
  const bool device = !backend.device().is_host();
  if (device && placed_planes_.owner() != &backend) placed_planes_ = to_backend(planes_, &backend);
  backend.simhash_codes({.planes = device ? &placed_planes_ : &planes_, .k = k_, .tables = tables_}, x, rows, codes);
  // One product of the vectors with every plane (planes and vectors read once), codes written.
  const double vectors = static_cast<double>(rows.empty() ? x.rows() : rows.size());
  const double planes = static_cast<double>(planes_.rows()), dim = static_cast<double>(dim_);
  profile::count_here(2.0 * vectors * planes * dim,
                      4.0 * (planes * dim + vectors * dim + vectors * static_cast<double>(tables_)));
}

}  // namespace frugal::lsh
