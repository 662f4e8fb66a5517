// The reference rankers on a hand-made problem whose P@k can be worked out by hand.
#include <catch2/catch.hpp>

#include "core/check.h"
#include "core/data/reference_rankers.h"

using namespace frugal::data;

namespace {

Dataset make(const std::vector<std::pair<std::vector<uint32_t>, std::vector<uint32_t>>>& points) {
  Dataset d;
  d.num_features = 4;
  d.num_labels = 4;
  for (const auto& [features, labels] : points) {
    const std::vector<float> ones(features.size(), 1.0f);
    d.points.add_point(features, ones, labels);
  }
  return d;
}

}  // namespace

TEST_CASE("references: most frequent label and label centroid P@k") {
  // Label 2 is the most frequent (3 points), then 0 (2), then 1 (1); label 3 never occurs in training.
  const Dataset train = make({{{0}, {0}}, {{0, 3}, {0}}, {{1}, {1}}, {{2}, {2}}, {{2}, {2}}, {{2, 3}, {2}}});
  // Test: feature 1 (label 1), feature 0 (label 0), feature 3 only (labels 0 and 2).
  const Dataset test = make({{{1}, {1}}, {{0}, {0}}, {{3}, {0, 2}}});
  const auto freq = most_frequent_precision(train, test, {1, 2});
  // Everyone gets [2, 0]: hits at 1 for the third point; within 2 for the second and third (twice).
  CHECK(freq.at(1) == Approx(1.0 / 3.0));
  CHECK(freq.at(2) == Approx((0.0 + 0.5 + 1.0) / 3.0));
  const auto centroid = label_centroid_precision(train, test, {1, 2});
  // Point 1 -> label 1 alone shares feature 1, then frequency: [1, 2]. Point 2 -> [0, 2].
  // Point 3 (feature 3): centroid 0 = (2,0,0,1)/sqrt(5) gives 0.447, centroid 2 = (0,0,3,1)/sqrt(10)
  // gives 0.316: [0, 2], P@1 1, P@2 1.
  CHECK(centroid.at(1) == Approx(1.0));
  CHECK(centroid.at(2) == Approx((0.5 + 0.5 + 1.0) / 3.0));
  Dataset other = test;
  other.num_features = 5;
  CHECK_THROWS_AS(label_centroid_precision(train, other, {1}), frugal::Error);
}

TEST_CASE("references: kNN votes of the most similar training points") {
  const Dataset train = make({{{0}, {0}}, {{0, 3}, {0}}, {{1}, {1}}, {{2}, {2}}, {{2}, {2}}, {{2, 3}, {2}}});
  // q0 (feature 1): neighbour t2 alone -> [1, then the most frequent: 2].
  // q1 (feature 0): t0 (cosine 1) and t1 (0.707) both vote 0 -> [0, 2].
  // q2 (feature 3): t1 and t5 (0.707 each): label 0 and label 2 tie, frequency puts 2 first -> [2, 0].
  // q3 (features 0, 2): t0, t3, t4 at 0.707, t1, t5 at 0.5: label 0 gets 1.207, label 2 gets 1.914
  //     -> [2, 0], a miss at 1; its single nearest neighbour is t0 (ties by point id) -> [0, 2].
  const Dataset test = make({{{1}, {1}}, {{0}, {0}}, {{3}, {0, 2}}, {{0, 2}, {0}}});
  const auto ten = knn_precision(train, test, {1, 2}, 10);
  CHECK(ten.at(1) == Approx(3.0 / 4));
  CHECK(ten.at(2) == Approx((0.5 + 0.5 + 1.0 + 0.5) / 4));
  // One neighbour: q2 -> t1 (the lower id of the tie) -> [0, 2]; q3 -> t0 -> [0, 2].
  const auto one = knn_precision(train, test, {1, 2}, 1);
  CHECK(one.at(1) == Approx(1.0));
  CHECK(one.at(2) == Approx((0.5 + 0.5 + 1.0 + 0.5) / 4));
  // A point sharing no feature with training (or with none at all): the most frequent labels.
  const Dataset lonely = make({{{}, {2}}});
  CHECK(knn_precision(train, lonely, {1}).at(1) == Approx(1.0));
  CHECK_THROWS_AS(knn_precision(train, test, {1}, 0), frugal::Error);
}
