#include "comm/thresholder.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

void ThresholdOptions::validate() const {
  FRUGAL_CHECK(keep > 0.0f && keep <= 1.0f, fmt::format("threshold: keep must be in (0, 1], got {}", keep));
  FRUGAL_CHECK(reestimate_every >= 1, "threshold: reestimate_every must be >= 1");
  FRUGAL_CHECK(exact || sample_size >= 1, "threshold: sample_size must be >= 1");
}

namespace {
// The k-th largest of `magnitudes` (1-based k), reordering them.
float kth_largest(std::vector<float>& magnitudes, float keep) {
  if (magnitudes.empty()) return 0.0f;
  const size_t n = magnitudes.size();
  // keep arrives as a float (0.05f is 0.0500000007): shave the representation error so that
  // 5% of 5000 is 250 entries, not 251.
  const auto k = std::clamp<size_t>(static_cast<size_t>(std::ceil(static_cast<double>(keep) * n * (1.0 - 1e-6))), 1, n);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(), std::greater<float>());
  return magnitudes[k - 1];
}
}  // namespace

float exact_threshold(std::span<const float> values, float keep) {
  std::vector<float> m(values.size());
  std::transform(values.begin(), values.end(), m.begin(), [](float v) { return std::abs(v); });
  return kth_largest(m, keep);
}

float sampled_threshold(std::span<const float> values, float keep, size_t samples, Rng& rng) {
  if (values.empty()) return 0.0f;
  std::vector<float> m(samples);
  for (float& x : m) x = std::abs(values[rng.below(values.size())]);
  return kth_largest(m, keep);
}

Thresholder::Thresholder(const ThresholdOptions& options, size_t size)
    : options_(options), residual_(size, 0.0f), rng_(Rng(options.seed).split(0x7d)) {
  options_.validate();
}

void Thresholder::compress(std::span<const float> gradient, std::vector<uint32_t>& indices, std::vector<float>& values) {
  FRUGAL_CHECK(gradient.size() == residual_.size(),
               fmt::format("threshold: gradient has {} entries, the residual {}", gradient.size(), residual_.size()));
  for (size_t i = 0; i < gradient.size(); ++i) residual_[i] += gradient[i];
  if (steps_ % options_.reestimate_every == 0)
    tau_ = options_.exact ? exact_threshold(residual_, options_.keep)
                          : sampled_threshold(residual_, options_.keep, options_.sample_size, rng_);
  ++steps_;
  indices.clear();
  values.clear();
  for (size_t i = 0; i < residual_.size(); ++i)
    if (std::abs(residual_[i]) >= tau_ && residual_[i] != 0.0f) {
      indices.push_back(static_cast<uint32_t>(i));
      values.push_back(residual_[i]);
      residual_[i] = 0.0f;  // sent in full: nothing of it stays behind
    }
}

}  // namespace frugal::comm
