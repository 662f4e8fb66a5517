#include "layers/lsh/simhash.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/vector_ops.h"

namespace frugal::lsh {

SimHashFamily::SimHashFamily(const SimHash& options, size_t dim, size_t tables, uint64_t seed)
    : k_(options.k), dim_(dim), tables_(tables), planes_(tables * options.k, dim) {
  FRUGAL_CHECK(k_ >= 1 && k_ <= 24, fmt::format("SimHash: k must be in 1..24, got {}", k_));
  Rng rng = Rng(seed).split(0x51);
  for (size_t i = 0; i < planes_.size(); ++i) planes_.data()[i] = rng.normal();
}

void SimHashFamily::hash(const float* v, uint32_t* codes) const {
  for (size_t t = 0; t < tables_; ++t) {
    uint32_t code = 0;
    for (int b = 0; b < k_; ++b)
      code = (code << 1) | (kernels::dot(planes_.row(t * k_ + b), v, dim_) > 0.0f ? 1u : 0u);
    codes[t] = code;
  }
}

}  // namespace frugal::lsh
