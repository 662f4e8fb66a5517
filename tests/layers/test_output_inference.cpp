// The output layer's LSH inference (top-k over the labels its tables return) and its
// initialization from label centroids.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <set>

#include "core/rng.h"
#include "layers/softmax_output.h"

using namespace frugal;

namespace {

Tensor random_tensor(size_t rows, size_t cols, uint64_t seed) {
  Rng rng(seed);
  Tensor t(rows, cols);
  for (size_t i = 0; i < t.size(); ++i) t.data()[i] = std::max(0.0f, rng.normal());  // ReLU-like
  return t;
}

}  // namespace

TEST_CASE("LSH inference: equals exact top-k when the tables return every label") {
  // K = 1 bin of 2 coordinates: 2 buckets per table, so 40 tables return (almost surely) every label.
  layers::SoftmaxOutput out({.in = 16, .out = 50, .sampler = layers::Sampler::lsh,
                             .lsh = {.family = lsh::Dwta{.k = 1, .bin_size = 2}, .tables = 40, .bucket_capacity = 64}});
  const Tensor h = random_tensor(20, 16, 3);
  std::vector<uint32_t> exact_labels, lsh_labels;
  std::vector<float> exact_scores, lsh_scores;
  out.top_k(h, 5, exact_labels, exact_scores);
  out.set_inference({.mode = Inference::lsh});
  out.top_k(h, 5, lsh_labels, lsh_scores);
  CHECK(lsh_labels == exact_labels);
  for (size_t i = 0; i < exact_scores.size(); ++i) CHECK(lsh_scores[i] == Approx(exact_scores[i]).margin(1e-5));
  CHECK(out.labels_scored() > 20 * 50);  // exact pass + the LSH pass
}

TEST_CASE("LSH inference: few candidates are padded with distinct labels at -inf; a cap is honoured") {
  // A model trained with the exact softmax gets inference tables on demand.
  layers::SoftmaxOutput out({.in = 16, .out = 4000, .sampler = layers::Sampler::exact});
  const Tensor h = random_tensor(8, 16, 5);
  out.set_inference({.mode = Inference::lsh, .candidates = 3});
  std::vector<uint32_t> labels;
  std::vector<float> scores;
  const uint64_t before = out.labels_scored();
  out.top_k(h, 10, labels, scores);
  REQUIRE(labels.size() == 80);
  CHECK(out.labels_scored() - before <= 8 * 3);
  for (size_t i = 0; i < 8; ++i) {
    std::set<uint32_t> distinct(labels.begin() + i * 10, labels.begin() + (i + 1) * 10);
    CHECK(distinct.size() == 10);
    for (size_t j = 3; j < 10; ++j) CHECK(std::isinf(scores[i * 10 + j]));  // at most 3 were scored
    for (size_t j = 1; j < 10; ++j) CHECK(scores[i * 10 + j] <= scores[i * 10 + j - 1]);
  }
  CHECK_THROWS_WITH(layers::SoftmaxOutput({.in = 4, .out = 3}).finish_centroids(0.0f, std::vector<float>(4)),
                    Catch::Contains("scale must be > 0"));
}

TEST_CASE("centroid initialization: row = scale * unit(label mean - mean), bias = -<row, mean>") {
  layers::SoftmaxOutput out({.in = 3, .out = 4, .sampler = layers::Sampler::exact});
  const std::vector<float> untouched(out.parameters()[0]->value.row(3), out.parameters()[0]->value.row(3) + 3);
  SparseBatch batch;
  const std::vector<uint32_t> f{0};
  const std::vector<float> v{1.0f};
  batch.add_point(f, v, std::vector<uint32_t>{0});
  batch.add_point(f, v, std::vector<uint32_t>{0, 1});
  batch.add_point(f, v, std::vector<uint32_t>{2});
  Tensor h(3, 3);
  const float rows[3][3] = {{1, 0, 0}, {3, 2, 0}, {0, 0, 4}};
  for (size_t i = 0; i < 3; ++i)
    for (size_t c = 0; c < 3; ++c) h.at(i, c) = rows[i][c];
  out.accumulate_centroids(h, batch);
  const std::vector<float> mean{1, 1, 1};
  out.finish_centroids(2.0f, mean);
  const Tensor& w = out.parameters()[0]->value;
  const Tensor& b = out.parameters()[1]->value;
  // Label 0: mean of points 0 and 1 = (2, 1, 0); minus the mean: (1, 0, -1).
  const float s = 2.0f / std::sqrt(2.0f);
  CHECK(w.at(0, 0) == Approx(s));
  CHECK(w.at(0, 1) == Approx(0.0f).margin(1e-6));
  CHECK(w.at(0, 2) == Approx(-s));
  CHECK(b.data()[0] == Approx(0.0f).margin(1e-6));  // -(s - s)
  // Label 1: point 1 alone, (3, 2, 0) - mean = (2, 1, -1).
  const float s1 = 2.0f / std::sqrt(6.0f);
  CHECK(w.at(1, 0) == Approx(2 * s1));
  CHECK(b.data()[1] == Approx(-(2 * s1 + s1 - s1)));
  // Label 3 has no points: its random row stays.
  for (size_t c = 0; c < 3; ++c) CHECK(w.at(3, c) == untouched[c]);
}

TEST_CASE("exact top-k over more labels than a scoring block (blocks of labels, merged) matches every label scored") {
  // 40,000 labels: f32 weights are scored 16,384 labels at a time for every point, as bf16 ones are.
  const size_t labels = 40000, dim = 8, points = 6, k = 5;
  layers::SoftmaxOutput out({.in = dim, .out = labels, .sampler = layers::Sampler::exact});
  Tensor& w = out.parameters()[0]->value;
  Tensor& bias = out.parameters()[1]->value;
  Rng rng(11);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < bias.size(); ++i) bias.data()[i] = 0.1f * rng.normal();
  const Tensor h = random_tensor(points, dim, 12);
  std::vector<uint32_t> got_labels;
  std::vector<float> got_scores;
  out.top_k(h, k, got_labels, got_scores);
  REQUIRE(got_labels.size() == points * k);
  for (size_t p = 0; p < points; ++p) {
    std::vector<std::pair<double, uint32_t>> all(labels);
    for (uint32_t l = 0; l < labels; ++l) {
      double s = bias.data()[l];
      for (size_t j = 0; j < dim; ++j) s += static_cast<double>(h.row(p)[j]) * w.row(l)[j];
      all[l] = {s, l};
    }
    std::partial_sort(all.begin(), all.begin() + k, all.end(), [](const auto& a, const auto& b) { return a > b; });
    for (size_t j = 0; j < k; ++j) {
      CHECK(got_labels[p * k + j] == all[j].second);
      CHECK(got_scores[p * k + j] == Approx(all[j].first).margin(1e-4));
    }
  }
}
