#include "core/propensity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

LabelCounts LabelCounts::of(const data::Dataset& train) {
  LabelCounts c;
  c.per_label.assign(train.num_labels, 0);
  c.add(train.points);
  return c;
}

void LabelCounts::add(const SparseBatch& batch) {
  points += batch.size();
  for (const uint32_t l : batch.label_ids) {
    if (l >= per_label.size()) per_label.resize(l + 1, 0);
    ++per_label[l];
  }
}

void PropensityOptions::validate() const {
  FRUGAL_CHECK(std::isfinite(a) && a > 0, fmt::format("propensity A must be > 0, got {}", a));
  FRUGAL_CHECK(std::isfinite(b) && b > 0, fmt::format("propensity B must be > 0, got {}", b));
}

Propensities::Propensities(const LabelCounts& counts, const PropensityOptions& options) : options_(options) {
  options_.validate();
  FRUGAL_CHECK(counts.points > 0, "propensities need the label counts of a non-empty training set");
  const double a = options_.a, b = options_.b;
  c_ = (std::log(static_cast<double>(counts.points)) - 1.0) * std::pow(b + 1.0, a);
  const auto inverse_of = [&](double n) { return 1.0 + c_ * std::exp(-a * std::log(n + b)); };
  inverse_.resize(counts.per_label.size());
  std::transform(counts.per_label.begin(), counts.per_label.end(), inverse_.begin(),
                 [&](uint64_t n) { return inverse_of(static_cast<double>(n)); });
  unseen_ = inverse_of(0.0);
}

double Propensities::inverse(uint32_t label) const { return label < inverse_.size() ? inverse_[label] : unseen_; }

}  // namespace frugal
