#include "layers/dlrm/click_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::layers {

ClickMetrics click_metrics(std::span<const float> probabilities, std::span<const float> labels) {
  FRUGAL_CHECK(probabilities.size() == labels.size(),
               fmt::format("click metrics: {} probabilities for {} labels", probabilities.size(), labels.size()));
  ClickMetrics m;
  const size_t n = labels.size();
  m.samples = n;
  if (n == 0) return m;
  double loss = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::clamp(static_cast<double>(probabilities[i]), 1e-7, 1 - 1e-7);
    loss -= labels[i] > 0.5f ? std::log(p) : std::log1p(-p);
    if (labels[i] > 0.5f) ++m.clicks;
  }
  m.logloss = loss / static_cast<double>(n);
  if (m.clicks == 0 || m.clicks == n) return m;
  // Mann-Whitney: the sum of the clicks' ranks (1-based, ties given their average rank).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probabilities[a] < probabilities[b]; });
  double rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && probabilities[order[j]] == probabilities[order[i]]) ++j;
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k)
      if (labels[order[k]] > 0.5f) rank_sum += average_rank;
    i = j;
  }
  const double pos = static_cast<double>(m.clicks), neg = static_cast<double>(n - m.clicks);
  m.auc = (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
  return m;
}

}  // namespace frugal::layers
