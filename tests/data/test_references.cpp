// The reference rankers on a hand-made problem whose P@k can be worked out by hand, and the label
// centroids behind one of them (core/data/label_centroids.h): cosines by hand, the file's round trip,
// and a damaged or truncated file refused by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "core/data/label_centroids.h"
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

namespace {
namespace fs = std::filesystem;

// Labels 0: (2,0,0,1)/sqrt5, 1: (0,1,0,0), 2: (0,0,3,1)/sqrt10; label 3 has no point.
Dataset training() { return make({{{0}, {0}}, {{0, 3}, {0}}, {{1}, {1}}, {{2}, {2}}, {{2}, {2}}, {{2, 3}, {2}}}); }

std::vector<std::pair<float, uint32_t>> nearest(const LabelCentroids& c, std::vector<uint32_t> ids,
                                                std::vector<float> vals, size_t n) {
  auto s = c.scratch();
  std::vector<std::pair<float, uint32_t>> out;
  c.nearest(ids, vals, n, s, out);
  return out;
}

fs::path fresh_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("label centroids: cosine to each label's normalized sum, best first") {
  const LabelCentroids c(training());
  CHECK(c.num_labels() == 4);
  CHECK(c.num_features() == 4);
  CHECK(c.entries() == 5);  // label 0: features 0, 3; label 1: 1; label 2: 2, 3
  // (1, 0, 0, 1)/sqrt2: label 0 at 3/sqrt10 = 0.949, label 2 at 1/sqrt20 = 0.224, label 1 shares nothing.
  const auto top = nearest(c, {0, 3}, {2.0f, 2.0f}, 5);  // the scale of the point does not matter
  REQUIRE(top.size() == 2);
  CHECK(top[0].second == 0);
  CHECK(top[0].first == Approx(3.0 / std::sqrt(10.0)));
  CHECK(top[1].second == 2);
  CHECK(top[1].first == Approx(1.0 / std::sqrt(20.0)));
  CHECK(nearest(c, {0, 3}, {1.0f, 1.0f}, 1).size() == 1);
  // A feature no training point has (or beyond the training features) scores nothing.
  CHECK(nearest(c, {7}, {1.0f}, 5).empty());
  // The scratch comes back clean: the same point twice gives the same answer.
  auto s = c.scratch();
  std::vector<std::pair<float, uint32_t>> a, b;
  c.nearest(std::vector<uint32_t>{2}, std::vector<float>{1.0f}, 3, s, a);
  c.nearest(std::vector<uint32_t>{2}, std::vector<float>{1.0f}, 3, s, b);
  CHECK(a == b);
}

TEST_CASE("label centroids: saved and loaded bit for bit; a damaged file is refused naming it") {
  const fs::path dir = fresh_dir("frugal-test-centroids");
  const LabelCentroids c(training());
  c.save(dir.string());
  CHECK(LabelCentroids::exists(dir.string()));
  const LabelCentroids back = LabelCentroids::load(dir.string());
  CHECK(back.entries() == c.entries());
  CHECK(back.num_labels() == c.num_labels());
  CHECK(nearest(back, {0, 3}, {1.0f, 1.0f}, 5) == nearest(c, {0, 3}, {1.0f, 1.0f}, 5));

  const fs::path file = dir / kLabelCentroidsFile;
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto write = [&](const std::string& b) { std::ofstream(file, std::ios::binary | std::ios::trunc) << b; };
  const auto message = [&] {
    try {
      LabelCentroids::load(dir.string());
    } catch (const frugal::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  write(flipped);
  CHECK_THAT(message(), Catch::Contains("label_centroids.bin") && Catch::Contains("checksum"));
  write(bytes.substr(0, bytes.size() - 7));
  CHECK_THAT(message(), Catch::Contains("label_centroids.bin"));
  write("");
  CHECK_THAT(message(), Catch::Contains("truncated"));
  fs::remove(file);
  CHECK_THAT(message(), Catch::Contains("no such file"));
  fs::create_directory(file);
  CHECK_THAT(message(), Catch::Contains("not a regular file"));
  fs::remove_all(dir);
}
