#include "core/data/dataset_split.h"

#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::data {

std::vector<uint32_t> shuffled_order(size_t n, uint64_t seed) {
  FRUGAL_CHECK(n <= UINT32_MAX, fmt::format("{} points: more than 2^32 are not supported", n));
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(seed);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

namespace {
Dataset empty_like(const Dataset& data, const std::string& source) {
  Dataset d;
  d.num_features = data.num_features;
  d.num_labels = data.num_labels;
  d.source = source;
  return d;
}
}  // namespace

Dataset shuffle(const Dataset& data, uint64_t seed) {
  Dataset out = empty_like(data, data.source);
  const auto order = shuffled_order(data.size(), seed);
  out.points.feature_ids.reserve(data.points.feature_ids.size());
  out.points.feature_values.reserve(data.points.feature_values.size());
  out.points.label_ids.reserve(data.points.label_ids.size());
  data.gather(order, out.points);
  return out;
}

void SplitOptions::validate() const {
  FRUGAL_CHECK(test_fraction >= 0.0 && test_fraction < 1.0,
               fmt::format("test fraction {}: expected a value in [0, 1)", test_fraction));
}

Split split(const Dataset& data, const SplitOptions& options) {
  options.validate();
  const auto order = shuffled_order(data.size(), options.seed);
  // Training points left per label; a point may leave for test only if each of its labels keeps one.
  std::vector<uint32_t> left(data.num_labels, 0);
  for (const uint32_t l : data.points.label_ids) {
    FRUGAL_CHECK(l < data.num_labels, fmt::format("{}: label {} >= {}", data.source, l, data.num_labels));
    ++left[l];
  }
  Split out;
  out.wanted_test = static_cast<size_t>(std::llround(options.test_fraction * static_cast<double>(data.size())));
  std::vector<uint32_t> train_ids, test_ids;
  train_ids.reserve(data.size() - out.wanted_test);
  test_ids.reserve(out.wanted_test);
  for (const uint32_t i : order) {
    const auto labels = data.points.labels_of(i);
    bool movable = test_ids.size() < out.wanted_test;
    size_t taken = 0;  // tentatively take the point's labels out of training (a repeated label twice)
    for (; movable && taken < labels.size(); ++taken) {
      if (left[labels[taken]] <= 1) break;
      --left[labels[taken]];
    }
    if (movable && taken == labels.size()) {
      test_ids.push_back(i);
    } else {
      for (size_t j = 0; j < taken; ++j) ++left[labels[j]];
      train_ids.push_back(i);
    }
  }
  out.train = empty_like(data, data.source + " (train part)");
  out.test = empty_like(data, data.source + " (test part)");
  data.gather(train_ids, out.train.points);
  data.gather(test_ids, out.test.points);
  return out;
}

}  // namespace frugal::data
