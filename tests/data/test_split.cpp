// Shuffle, split and statistics of XMC data sets: the split is seeded, keeps every point exactly
// once, reaches the wanted size when labels allow, and never puts a label in test that training
// lacks; the histogram counts labels by frequency.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "core/data/ctr_split.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/rng.h"

using namespace frugal;

namespace {

// Points i = 0..n-1 with feature i (so each point can be recognized) and Zipf-like labels, many
// of which occur only once or twice.
data::Dataset zipf_points(size_t n, uint32_t labels, uint64_t seed) {
  data::Dataset d;
  d.num_features = static_cast<uint32_t>(n);
  d.num_labels = labels;
  Rng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = static_cast<uint32_t>(i);
    const float value = 1.0f;
    std::vector<uint32_t> ls;
    const size_t count = rng.below(4);  // 0..3 labels, some points without any
    for (size_t j = 0; j < count; ++j) {
      const auto l = static_cast<uint32_t>(static_cast<double>(labels) * std::pow(rng.uniform(), 3.0));
      if (std::find(ls.begin(), ls.end(), l) == ls.end()) ls.push_back(l);
    }
    d.points.add_point({&id, 1}, {&value, 1}, ls);
  }
  return d;
}

std::vector<uint32_t> ids_of(const data::Dataset& d) {
  return {d.points.feature_ids.begin(), d.points.feature_ids.end()};
}

}  // namespace

TEST_CASE("split: no test label is missing from training, every point lands once, seeded") {
  const auto d = zipf_points(5000, 3000, 7);
  const auto s = data::split(d, {.test_fraction = 0.2, .seed = 11});
  CHECK(s.wanted_test == 1000);
  CHECK(s.test.size() == 1000);  // enough frequent labels to fill it
  CHECK(s.train.size() + s.test.size() == d.size());
  std::set<uint32_t> train_labels(s.train.points.label_ids.begin(), s.train.points.label_ids.end());
  for (const uint32_t l : s.test.points.label_ids) REQUIRE(train_labels.count(l) == 1);
  auto all = ids_of(s.train);
  const auto test_ids = ids_of(s.test);
  all.insert(all.end(), test_ids.begin(), test_ids.end());
  std::sort(all.begin(), all.end());
  for (uint32_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == i);
  // Each point keeps its own labels.
  for (size_t i = 0; i < s.test.size(); ++i) {
    const uint32_t original = s.test.points.features_of(i)[0];
    const auto a = s.test.points.labels_of(i), b = d.points.labels_of(original);
    REQUIRE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  CHECK(ids_of(data::split(d, {.test_fraction = 0.2, .seed = 11}).test) == test_ids);
  CHECK(ids_of(data::split(d, {.test_fraction = 0.2, .seed = 12}).test) != test_ids);
}

TEST_CASE("split: labels too rare to leave training keep their points there") {
  data::Dataset d;
  d.num_features = 1;
  d.num_labels = 3;
  const uint32_t f = 0;
  const float v = 1.0f;
  // Label 0 on three points, label 1 on one, label 2 repeated on one point (it has nowhere to go).
  const std::vector<std::vector<uint32_t>> labels = {{0}, {0}, {0, 1}, {2, 2}, {}};
  for (const auto& l : labels) d.points.add_point({&f, 1}, {&v, 1}, l);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto s = data::split(d, {.test_fraction = 0.99, .seed = seed});
    std::multiset<uint32_t> test(s.test.points.label_ids.begin(), s.test.points.label_ids.end());
    CHECK(test.count(1) == 0);
    CHECK(test.count(2) == 0);
    CHECK(test.count(0) <= 2);  // label 0 keeps at least one of its three training points
    CHECK(s.test.size() == test.count(0) + 1);  // the unlabelled point may always go
    CHECK(s.test.size() < s.wanted_test);
  }
  CHECK_THROWS_WITH(data::split(d, {.test_fraction = 1.0}), Catch::Contains("expected a value in [0, 1)"));
}

TEST_CASE("split: stratified, each label's points go to test in about the share asked") {
  // 40 labels of 10 to 400 points each, one label a point.
  data::Dataset d;
  d.num_labels = 40;
  std::vector<uint32_t> per_label(40);
  for (uint32_t l = 0; l < 40; ++l) {
    for (uint32_t j = 0; j < 10 + 10 * l; ++j) {
      const uint32_t id = static_cast<uint32_t>(d.size());
      const float v = 1.0f;
      d.points.add_point({&id, 1}, {&v, 1}, std::vector<uint32_t>{l});
    }
    per_label[l] = 10 + 10 * l;
  }
  d.num_features = static_cast<uint32_t>(d.size());
  const auto s = data::split(d, {.test_fraction = 0.1, .seed = 5, .stratified = true});
  CHECK(s.test.size() == s.wanted_test);
  CHECK(s.test_rows.size() == s.test.size());
  CHECK(s.train_rows.size() + s.test_rows.size() == d.size());
  // The rows name the points each part holds, in the data's order, and no point is in both.
  CHECK(std::is_sorted(s.test_rows.begin(), s.test_rows.end()));
  CHECK(ids_of(s.test) == s.test_rows);
  CHECK(ids_of(s.train) == s.train_rows);
  std::vector<uint32_t> both;
  std::set_intersection(s.train_rows.begin(), s.train_rows.end(), s.test_rows.begin(), s.test_rows.end(),
                        std::back_inserter(both));
  CHECK(both.empty());
  // Every label within one point of its share (a random split misses the small ones by several).
  std::vector<size_t> held(40, 0);
  for (const uint32_t l : s.test.points.label_ids) ++held[l];
  for (uint32_t l = 0; l < 40; ++l) CHECK(std::abs(static_cast<double>(held[l]) - 0.1 * per_label[l]) <= 1.0);
  // Seeded: the same seed the same points, another seed others.
  CHECK(data::split(d, {.test_fraction = 0.1, .seed = 5, .stratified = true}).test_rows == s.test_rows);
  CHECK(data::split(d, {.test_fraction = 0.1, .seed = 6, .stratified = true}).test_rows != s.test_rows);
  // The multi-label Zipf set: no test label is missing from training, as in the random split.
  const auto z = zipf_points(5000, 3000, 7);
  const auto zs = data::split(z, {.test_fraction = 0.05, .seed = 3, .stratified = true});
  CHECK(zs.test.size() == 250);
  std::set<uint32_t> train_labels(zs.train.points.label_ids.begin(), zs.train.points.label_ids.end());
  for (const uint32_t l : zs.test.points.label_ids) REQUIRE(train_labels.count(l) == 1);
}

TEST_CASE("split_ctr: click-stratified, every sample once, in the data's order, seeded") {
  // 3,000 samples, every 25th a click (120 clicks); dense feature 0 names the sample.
  data::CtrDataset d;
  for (size_t i = 0; i < 3000; ++i) {
    data::CtrRecord r;
    r.label = i % 25 == 0 ? 1 : 0;
    r.ints[0] = static_cast<int64_t>(i);
    data::append_record(r, d);
  }
  const auto name = [](const data::CtrDataset& part, size_t i) {
    return static_cast<uint32_t>(std::lround(std::expm1(static_cast<double>(part.dense_of(i)[0]))));
  };
  const data::CtrSplit s = data::split_ctr(d, 0.05, 9);
  CHECK(s.test.size == 150);
  CHECK(s.train.size == 2850);
  REQUIRE(s.test_rows.size() == s.test.size);
  REQUIRE(s.train_rows.size() == s.train.size);
  CHECK(std::is_sorted(s.test_rows.begin(), s.test_rows.end()));
  CHECK(std::is_sorted(s.train_rows.begin(), s.train_rows.end()));
  std::vector<uint32_t> both;
  std::set_intersection(s.train_rows.begin(), s.train_rows.end(), s.test_rows.begin(), s.test_rows.end(),
                        std::back_inserter(both));
  CHECK(both.empty());
  // Each part holds the samples its rows name, with their labels.
  for (const auto& [part, rows] : {std::pair{&s.test, &s.test_rows}, std::pair{&s.train, &s.train_rows}})
    for (size_t i = 0; i < part->size; ++i) {
      REQUIRE(name(*part, i) == (*rows)[i]);
      REQUIRE(part->labels[i] == d.labels[(*rows)[i]]);
    }
  // The clicks' share of the held-back part is the data's, within one click (a random 5% draws
  // 6 +- 2.4 of them).
  const double clicks = static_cast<double>(std::count(s.test.labels.begin(), s.test.labels.end(), 1.0f));
  CHECK(std::abs(clicks - 0.05 * 120) <= 1.0);
  CHECK(data::split_ctr(d, 0.05, 9).test_rows == s.test_rows);
  CHECK(data::split_ctr(d, 0.05, 10).test_rows != s.test_rows);
  CHECK(data::split_ctr(d, 0.0, 9).test.size == 0);
  CHECK_THROWS_WITH(data::split_ctr(d, 1.0, 9), Catch::Contains("test fraction 1: expected a value in [0, 1)"));
}

TEST_CASE("shuffle: a seeded permutation of the points") {
  const auto d = zipf_points(1000, 100, 3);
  const auto a = data::shuffle(d, 5), b = data::shuffle(d, 5), c = data::shuffle(d, 6);
  CHECK(ids_of(a) == ids_of(b));
  CHECK(ids_of(a) != ids_of(c));
  CHECK(ids_of(a) != ids_of(d));
  auto sorted = ids_of(a);
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == ids_of(d));
  CHECK(a.points.label_ids.size() == d.points.label_ids.size());
}

TEST_CASE("stats: counts, averages and the label-frequency histogram") {
  data::Dataset d;
  d.num_features = 10;
  d.num_labels = 8;
  const std::vector<uint32_t> f = {1, 2};
  const std::vector<float> v = {1.0f, 1.0f};
  // Label 0 on 5 points, label 1 on 2, label 2 on 1; labels 3..7 never occur.
  const std::vector<std::vector<uint32_t>> labels = {{0}, {0, 1}, {0, 1}, {0}, {0, 2}, {}};
  for (const auto& l : labels) d.points.add_point(f, v, l);
  const auto s = data::compute_stats(d);
  CHECK(s.points == 6);
  CHECK(s.features_used == 2);
  CHECK(s.labels_used == 3);
  CHECK(s.average_nonzeros == 2.0);
  CHECK(s.average_labels == Approx(8.0 / 6.0));
  CHECK(s.points_without_labels == 1);
  CHECK(s.max_label_frequency == 5);
  std::map<std::pair<uint64_t, uint64_t>, size_t> hist;
  for (const auto& b : s.label_histogram) hist[{b.lo, b.hi}] = b.labels;
  CHECK(hist[{0, 0}] == 5);
  CHECK(hist[{1, 1}] == 1);
  CHECK(hist[{2, 2}] == 1);
  CHECK(hist[{3, 4}] == 0);
  CHECK(hist[{5, 8}] == 1);
  CHECK(s.label_histogram.back().hi == 8);
  // 8 occurrences: 5 of label 0 (support 5), 2 of label 1 (support 2), 1 of label 2 (support 1);
  // sorted by support 1, 2, 2, 5, 5, 5, 5, 5: the median occurrence has support 5, and 3 of the 8
  // have a label with <= 2 points.
  CHECK(s.median_label_support == 5);
  CHECK(s.rare_label_share == Approx(3.0 / 8.0));
  CHECK(s.adjacent_same_label == Approx(4.0 / 5.0));  // the unlabelled last point shares nothing
  // Declared sizes far beyond the ids (counted over sorted ids, not arrays of the declared sizes):
  // the same figures.
  data::Dataset wide = d;
  wide.num_features = wide.num_labels = uint32_t{1} << 31;
  const auto w = data::compute_stats(wide);
  CHECK(w.features_used == s.features_used);
  CHECK(w.labels_used == s.labels_used);
  CHECK(w.max_label_frequency == s.max_label_frequency);
  CHECK(w.median_label_support == s.median_label_support);
  CHECK(w.rare_label_share == s.rare_label_share);
  REQUIRE(w.label_histogram.size() == s.label_histogram.size());
  for (size_t b = 1; b < w.label_histogram.size(); ++b) CHECK(w.label_histogram[b].labels == s.label_histogram[b].labels);
  CHECK(w.label_histogram[0].labels == (size_t{1} << 31) - 3);
  CHECK(s.looks_sorted());
}
