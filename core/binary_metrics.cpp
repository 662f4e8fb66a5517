#include "core/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {
namespace {

void check_inputs(const char* what, std::span<const float> values, std::span<const float> labels) {
  FRUGAL_CHECK(values.size() == labels.size(),
               fmt::format("{}: {} predictions but {} labels", what, values.size(), labels.size()));
  for (size_t i = 0; i < labels.size(); ++i) {
    FRUGAL_CHECK(labels[i] == 0.0f || labels[i] == 1.0f,
                 fmt::format("{}: label {} of sample {}: expected 0 or 1", what, labels[i], i));
    FRUGAL_CHECK(!std::isnan(values[i]), fmt::format("{}: prediction of sample {} is NaN", what, i));
  }
}

}  // namespace

double auc(std::span<const float> scores, std::span<const float> labels) {
  check_inputs("auc", scores, labels);
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Sum of the 1-based ranks of the positives, a group of tied scores sharing its average rank.
  // Doubles hold these sums exactly up to 2^53 (n up to ~10^8).
  double positive_rank_sum = 0, positives = 0;
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo;
    double group_positives = 0;
    while (hi < n && scores[order[hi]] == scores[order[lo]]) group_positives += labels[order[hi++]];
    const double average_rank = (static_cast<double>(lo + 1) + static_cast<double>(hi)) / 2;
    positive_rank_sum += group_positives * average_rank;
    positives += group_positives;
    lo = hi;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

double logloss(std::span<const float> probabilities, std::span<const float> labels) {
  check_inputs("logloss", probabilities, labels);
  if (probabilities.empty()) return 0;
  constexpr double kEps = 1e-7;
  double sum = 0;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    FRUGAL_CHECK(probabilities[i] >= 0.0f && probabilities[i] <= 1.0f,
                 fmt::format("logloss: probability {} of sample {} is outside [0, 1]", probabilities[i], i));
    const double p = std::clamp<double>(probabilities[i], kEps, 1 - kEps);
    sum -= labels[i] == 1.0f ? std::log(p) : std::log(1 - p);
  }
  return sum / static_cast<double>(probabilities.size());
}

}  // namespace frugal
