#include "core/data/dataset_split.h"

#include <algorithm>
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

namespace {

// The order a stratified split visits the points in: grouped by each point's rarest label (fewest
// points; a point without labels is a group of its own), the groups in a seeded order, the points
// of a group in a seeded order.
std::vector<uint32_t> stratified_order(const Dataset& data, const std::vector<uint32_t>& counts, uint64_t seed) {
  const size_t n = data.size();
  const std::vector<uint32_t> shuffled = shuffled_order(n, seed);
  std::vector<uint32_t> rank(n);  // each point's place in the shuffled order: the tie-break
  for (size_t i = 0; i < n; ++i) rank[shuffled[i]] = static_cast<uint32_t>(i);
  Rng rng(Rng(seed).split(0x5712a7).next_u64());
  std::vector<uint64_t> group_key(data.num_labels + 1);  // a label's random place among the groups
  for (uint64_t& k : group_key) k = rng.next_u64();
  std::vector<uint32_t> group(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t rarest = data.num_labels;  // none
    for (const uint32_t l : data.points.labels_of(i))
      if (rarest == data.num_labels || counts[l] < counts[rarest] || (counts[l] == counts[rarest] && l < rarest))
        rarest = l;
    group[i] = rarest;
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const uint64_t ga = group_key[group[a]], gb = group_key[group[b]];
    if (group[a] != group[b]) return ga != gb ? ga < gb : group[a] < group[b];
    return rank[a] < rank[b];
  });
  return order;
}

}  // namespace

Split split(const Dataset& data, const SplitOptions& options) {
  options.validate();
  // Training points left per label; a point may leave for test only if each of its labels keeps one.
  std::vector<uint32_t> left(data.num_labels, 0);
  for (const uint32_t l : data.points.label_ids) {
    FRUGAL_CHECK(l < data.num_labels, fmt::format("{}: label {} >= {}", data.source, l, data.num_labels));
    ++left[l];
  }
  const auto order = options.stratified ? stratified_order(data, left, options.seed)
                                        : shuffled_order(data.size(), options.seed);
  Split out;
  out.wanted_test = static_cast<size_t>(std::llround(options.test_fraction * static_cast<double>(data.size())));
  std::vector<uint32_t>& train_ids = out.train_rows;
  std::vector<uint32_t>& test_ids = out.test_rows;
  train_ids.reserve(data.size() - out.wanted_test);
  test_ids.reserve(out.wanted_test);
  // Stratified: a point's turn comes every 1/test_fraction points of the grouped order (from a
  // seeded offset); a turn a point cannot take waits for the next point.
  double due = options.stratified ? Rng(options.seed).split(0x0ff5e7).uniform() : 0.0;
  for (const uint32_t i : order) {
    const auto labels = data.points.labels_of(i);
    if (options.stratified) due += options.test_fraction;
    bool movable = test_ids.size() < out.wanted_test && (!options.stratified || due >= 1.0);
    size_t taken = 0;  // tentatively take the point's labels out of training (a repeated label twice)
    for (; movable && taken < labels.size(); ++taken) {
      if (left[labels[taken]] <= 1) break;
      --left[labels[taken]];
    }
    if (movable && taken == labels.size()) {
      test_ids.push_back(i);
      due -= 1.0;
    } else {
      for (size_t j = 0; j < taken; ++j) ++left[labels[j]];
      train_ids.push_back(i);
    }
  }
  if (options.stratified) {  // the data's own order
    std::sort(train_ids.begin(), train_ids.end());
    std::sort(test_ids.begin(), test_ids.end());
  }
  out.train = empty_like(data, data.source + " (train part)");
  out.test = empty_like(data, data.source + " (test part)");
  data.gather(train_ids, out.train.points);
  data.gather(test_ids, out.test.points);
  return out;
}

}  // namespace frugal::data
