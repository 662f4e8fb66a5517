// --infer ensemble (train/ensemble_ranker.h): the blend's ends rank as its members do (the network,
// the label centroids, the nearest training points' votes), a point sharing no feature with the
// training set keeps the network's ranking, and a checkpoint's ensemble (its files, or members
// built from the training set) gives the trainer's metrics through the Predictor on 1 and 2 ranks.
#include <catch2/catch.hpp>

#include <filesystem>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/data/synth_xmc.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_manifest.h"
#include "train/ensemble_ranker.h"
#include "train/predictor.h"
#include "train/trainer.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

// Labels 0: (2,0,0,1)/sqrt5, 1: (0,1,0,0), 2: (0,0,3,1)/sqrt10, 3: no point.
data::Dataset training() {
  data::Dataset d;
  d.num_features = 4;
  d.num_labels = 4;
  const std::vector<std::pair<std::vector<uint32_t>, uint32_t>> points = {{{0}, 0}, {{0, 3}, 0}, {{1}, 1},
                                                                          {{2}, 2}, {{2}, 2},    {{2, 3}, 2}};
  for (const auto& [features, label] : points)
    d.points.add_point(features, std::vector<float>(features.size(), 1.0f), std::vector<uint32_t>{label});
  return d;
}

SparseBatch points(const std::vector<std::vector<uint32_t>>& features) {
  SparseBatch b;
  for (const auto& f : features) b.add_point(f, std::vector<float>(f.size(), 1.0f), std::vector<uint32_t>{});
  return b;
}

}  // namespace

TEST_CASE("ensemble: weight 0 ranks as the network, weight 1 as the centroids, no shared feature as the network") {
  const data::LabelCentroids centroids(training());
  // Point 0 (feature 2): the centroids say 2; the network says 3, 1, 0, 2.
  // Point 1 (feature 0, 3): the centroids say 0, then 2; the network says 3, 2, 1, 0.
  const SparseBatch batch = points({{2}, {0, 3}});
  const std::vector<uint32_t> net_labels = {3, 1, 0, 2, 3, 2, 1, 0};
  const std::vector<float> net_scores = {4.0f, 3.0f, 2.0f, 1.0f, 4.0f, 3.5f, 1.0f, 0.5f};
  std::vector<uint32_t> labels;
  std::vector<float> scores;
  const train::EnsembleRanker network({.centroids = &centroids}, {.weight = 0.0f, .knn_weight = 0.0f, .temperature = 0.05f, .candidates = 4});
  REQUIRE(network.blend(batch, net_labels, net_scores, 4, 3, labels, scores) == 3);
  CHECK(labels == std::vector<uint32_t>{3, 1, 0, 3, 2, 1});
  const train::EnsembleRanker cent({.centroids = &centroids}, {.weight = 1.0f, .knn_weight = 0.0f, .temperature = 0.05f, .candidates = 4});
  cent.blend(batch, net_labels, net_scores, 4, 2, labels, scores);
  // The centroids' labels first; the network's (weight 0) only break the ties after them.
  CHECK(labels[0] == 2);
  CHECK(labels[2] == 0);
  CHECK(labels[3] == 2);
  CHECK(scores[0] == Approx(1.0f));
  // Half and half: for point 1 the network's 2 (second) is the centroids' second too, and the
  // network's 3 is nowhere in the centroids' list; both lists agree on nothing first.
  const train::EnsembleRanker half({.centroids = &centroids}, {.weight = 0.5f, .knn_weight = 0.0f, .temperature = 1.0f, .candidates = 4});
  half.blend(batch, net_labels, net_scores, 4, 4, labels, scores);
  for (size_t i = 0; i < 2; ++i) {
    float sum = 0.0f;
    for (size_t j = 0; j < 4; ++j) sum += scores[i * 4 + j];
    CHECK(sum == Approx(1.0f));  // every candidate of both lists is among the 4 labels
    for (size_t j = 1; j < 4; ++j) CHECK(scores[i * 4 + j - 1] >= scores[i * 4 + j]);
  }
  // A point with a feature no centroid has: the network's order, whatever the weight.
  const SparseBatch lonely = points({{}});
  cent.blend(lonely, {1, 0, 2}, {3.0f, 2.0f, 1.0f}, 3, 3, labels, scores);
  CHECK(labels == std::vector<uint32_t>{1, 0, 2});
  // The nearest training points alone: point 0's neighbours (t3, t4, then t5) all vote 2; point
  // 1's (t1, t0, t5) vote 0 (1.707) before 2 (0.5).
  const data::NearestPoints near(training());
  const train::EnsembleRanker knn({.points = &near}, {.weight = 0.0f, .knn_weight = 1.0f, .temperature = 0.05f, .candidates = 4});
  knn.blend(batch, net_labels, net_scores, 4, 2, labels, scores);
  CHECK(labels[0] == 2);
  CHECK(labels[2] == 0);
  CHECK(labels[3] == 2);
  // All three: the shares add up to 1 over the union of the lists.
  const train::EnsembleRanker all({&centroids, &near}, {.weight = 0.3f, .knn_weight = 0.3f, .temperature = 1.0f, .candidates = 4});
  all.blend(batch, net_labels, net_scores, 4, 4, labels, scores);
  CHECK(scores[0] + scores[1] + scores[2] + scores[3] == Approx(1.0f));
  const train::EnsembleMembers cent_only{.centroids = &centroids};
  CHECK_THROWS_WITH(train::EnsembleRanker(cent_only, {.weight = 1.5f, .knn_weight = 0.0f}), Catch::Contains("--ensemble-weight 1.5"));
  CHECK_THROWS_WITH(train::EnsembleRanker(cent_only, {.knn_weight = 0.0f, .temperature = 0.0f}), Catch::Contains("--ensemble-temperature 0"));
  CHECK_THROWS_WITH(train::EnsembleRanker({&centroids, &near}, {.weight = 0.6f, .knn_weight = 0.6f}),
                    Catch::Contains("add up to more than 1"));
  CHECK_THROWS_WITH(train::EnsembleRanker(cent_only, {.weight = 0.5f, .knn_weight = 0.2f}), Catch::Contains("needs the nearest training points"));
}

TEST_CASE("ensemble: a checkpoint's members give the trainer's metrics through the predictor, on 1 and 2 ranks") {
  host_backend().set_num_threads(1);
  const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 600, .labels = 120, .train = 480, .test = 100, .nnz = 15, .labels_per_point = 1, .seed = 9});
  const layers::NetworkSpec spec{.features = 600, .labels = 120, .hidden = 16, .sampler = "lsh", .tables = 8, .seed = 5};
  const std::string dir = "ensemble_test_ckpt";
  fs::remove_all(dir);
  Model m;
  layers::build_network(m, spec, Placement{});
  train::Trainer t(m, {});
  t.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false, .max_steps = 8});
  train::save_checkpoint(dir, m, t, layers::network_config(spec));
  const data::LabelCentroids centroids(d.train);
  const data::NearestPoints near(d.train);
  const train::EnsembleOptions options{.weight = 0.5f, .knn_weight = 0.2f, .temperature = 0.05f, .candidates = 20};
  const train::EnsembleRanker ranker({&centroids, &near}, options);
  const train::EvalResult plain = t.evaluate(d.test, {});
  const train::EvalResult blended = t.evaluate(d.test, {.ensemble = &ranker});
  // The centroids alone rank this clean synthetic set far better than 8 steps of training.
  CHECK(blended.p(1) > plain.p(1) + 0.1);
  CHECK_THROWS_WITH(train::Predictor(dir, {.ensemble = options}), Catch::Contains("label_centroids.bin"));
  centroids.save(dir);
  // A file beside the checkpoint that its manifest does not record is not the run's own.
  CHECK_THROWS_WITH(train::Predictor(dir, {.ensemble = options}), Catch::Contains("label_centroids.bin: manifest.json does "
                                                                          "not list it"));
  train::save_checkpoint(dir, m, t, layers::network_config(spec));  // now the manifest records it
  CHECK_THROWS_WITH(train::Predictor(dir, {.ensemble = options}), Catch::Contains("nearest_points.bin"));
  // A member the checkpoint lacks comes from the training set when one is given.
  CHECK(train::Predictor(dir, {.ensemble = options, .ensemble_train = &d.train}).evaluate(d.test).precision ==
        blended.precision);
  near.save(dir);
  train::save_checkpoint(dir, m, t, layers::network_config(spec));
  CHECK(train::Predictor(dir, {.ensemble = options}).evaluate(d.test).precision == blended.precision);
  std::vector<RankingScores> got(2);
  std::mutex mu;
  comm::run_local(2, [&](comm::Communicator& c) {
    RankingScores s = train::Predictor(dir, {.group = &c, .ensemble = options}).evaluate(d.test);
    std::lock_guard<std::mutex> lock(mu);
    got[c.rank()] = s;
  });
  for (const RankingScores& g : got)
    for (const auto& [k, p] : blended.precision) CHECK(g.precision.at(k) == Approx(p).margin(1e-9));
  fs::remove_all(dir);
}
