#include "layers/lsh/negative_sampler.h"

#include <cmath>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::lsh {

NegativeSampler::NegativeSampler(size_t labels, double uniform_share) : uniform_share_(uniform_share) {
  FRUGAL_CHECK(labels > 0, "negative sampler: no labels");
  FRUGAL_CHECK(uniform_share >= 0.0 && uniform_share <= 1.0,
               fmt::format("negative sampler: uniform share must be in [0, 1], got {}", uniform_share));
  prob_.assign(labels, 1.0 / static_cast<double>(labels));
  build_alias();
}

void NegativeSampler::set_counts(std::span<const uint32_t> counts) {
  FRUGAL_CHECK(counts.size() == prob_.size(),
               fmt::format("negative sampler: {} label counts for {} labels", counts.size(), prob_.size()));
  double total = 0.0;
  for (const uint32_t c : counts) total += c;
  const double n = static_cast<double>(prob_.size());
  // Without any counted label (a slice whose labels never occur) the proposal stays uniform.
  const double u = total > 0.0 ? uniform_share_ : 1.0;
  std::vector<double> prob(prob_.size());
  for (size_t j = 0; j < prob.size(); ++j) prob[j] = (1.0 - u) * (total > 0.0 ? counts[j] / total : 0.0) + u / n;
  if (prob == prob_) return;  // the same proposal (the trainer sets the counts every epoch)
  prob_ = std::move(prob);
  build_alias();
}

void NegativeSampler::build_alias() {
  // Vose's method: O(n) construction, O(1) draws; deterministic (no randomness in construction).
  const size_t n = prob_.size();
  threshold_.assign(n, 1.0f);
  alias_.resize(n);
  std::vector<double> scaled(n);
  std::vector<uint32_t> small, large;
  for (size_t j = 0; j < n; ++j) {
    scaled[j] = prob_[j] * static_cast<double>(n);
    alias_[j] = static_cast<uint32_t>(j);
    (scaled[j] < 1.0 ? small : large).push_back(static_cast<uint32_t>(j));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back(), l = large.back();
    small.pop_back();
    threshold_[s] = static_cast<float>(scaled[s]);
    alias_[s] = l;
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What remains is 1 up to rounding: keep it.
  log_prob_.resize(n);
  for (size_t j = 0; j < n; ++j) log_prob_[j] = std::log(prob_[j]);
  ++generation_;
}

uint32_t NegativeSampler::draw(Rng& rng) const {
  const auto j = static_cast<uint32_t>(rng.below(prob_.size()));
  return rng.uniform() < threshold_[j] ? j : alias_[j];
}

}  // namespace frugal::lsh
