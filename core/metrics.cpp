#include "core/metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

PrecisionAtK::PrecisionAtK(std::vector<size_t> ks) : ks_(std::move(ks)) {
  FRUGAL_CHECK(!ks_.empty(), "P@k: give at least one k");
  for (const size_t k : ks_) FRUGAL_CHECK(k > 0, "P@k: k must be > 0");
  max_k_ = *std::max_element(ks_.begin(), ks_.end());
  hits_.assign(ks_.size(), 0.0);
}

void PrecisionAtK::add(const SparseBatch& batch, const std::vector<uint32_t>& top) {
  const size_t b = batch.size();
  // Rows may be shorter than the largest k (a model with L < k labels ranks only L): missing
  // predictions are misses, and P@k still divides by k.
  FRUGAL_CHECK(b == 0 || top.size() % b == 0,
               fmt::format("P@k: {} predictions do not split into {} equal rows", top.size(), b));
  const size_t stride = b == 0 ? 0 : top.size() / b;
  for (size_t i = 0; i < b; ++i) {
    const auto labels = batch.labels_of(i);
    size_t hit = 0;
    for (size_t j = 0; j < max_k_; ++j) {
      if (j < stride && std::find(labels.begin(), labels.end(), top[i * stride + j]) != labels.end()) ++hit;
      for (size_t q = 0; q < ks_.size(); ++q)
        if (ks_[q] == j + 1) hits_[q] += static_cast<double>(hit) / static_cast<double>(ks_[q]);
    }
  }
  points_ += b;
}

double PrecisionAtK::value(size_t k) const {
  for (size_t q = 0; q < ks_.size(); ++q)
    if (ks_[q] == k) return points_ == 0 ? 0.0 : hits_[q] / static_cast<double>(points_);
  throw Error(fmt::format("P@{} was not requested", k));
}

std::map<size_t, double> PrecisionAtK::values() const {
  std::map<size_t, double> out;
  for (const size_t k : ks_) out[k] = value(k);
  return out;
}

}  // namespace frugal
