// The best epoch on validation, kept and returned (train/best_epoch.h, train/model_snapshot.h,
// train/served_checkpoint.h), and the run that holds back a validation split (train/run/
// validation_plan.h): the held-back points never train, the best epoch is what the run returns and
// what its checkpoint folder serves, and the ensemble's blend is chosen on the split.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/data/label_centroids.h"
#include "core/data/nearest_points.h"
#include "core/data/synth_xmc.h"
#include "core/device.h"
#include "core/model.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/best_epoch.h"
#include "train/checkpoint_manifest.h"
#include "train/predictor.h"
#include "train/ensemble_choice.h"
#include "train/run/run.h"
#include "train/run/trained_model.h"
#include "train/run/validation_plan.h"
#include "train/served_checkpoint.h"
#include "train/trainer.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

std::vector<float> weights_of(const Model& m) {
  std::vector<float> out;
  for (const Parameter* p : m.parameters()) {
    std::vector<float> v(p->value.size());
    copy_to_host(p->value, v.data());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

const layers::NetworkSpec kSpec{.features = 600, .labels = 120, .hidden = 16, .sampler = "lsh", .tables = 8, .seed = 5};

data::SynthXmc small_set() {
  return data::generate_synth_xmc(
      {.features = 600, .labels = 120, .train = 600, .test = 100, .nnz = 15, .labels_per_point = 2, .seed = 9});
}

}  // namespace

TEST_CASE("best epoch: kept in memory, put back when a later epoch scored worse, LSH tables included") {
  set_threads(host_backend(), 1);
  const data::SynthXmc d = small_set();
  Model m;
  layers::build_network(m, kSpec, Placement{});
  train::Trainer t(m, {});
  train::BestEpoch best(2, "");
  const auto no_folder = [](const std::string&) { FAIL("the best epoch has no folder"); };
  t.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false});
  CHECK(best.record(1, 0.5, m, no_folder));
  const std::vector<float> first = weights_of(m);
  const train::EvalResult first_scores = t.evaluate(d.test, {.inference = Inference::lsh});
  t.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false});
  CHECK_FALSE(best.record(2, 0.4, m, no_folder));
  CHECK(weights_of(m) != first);
  CHECK_FALSE(best.should_stop());
  t.fit_epoch(d.train, {.batch = 64, .seed = 3, .progress = false});
  CHECK_FALSE(best.record(3, 0.5, m, no_folder));  // not better: a tie keeps the earlier epoch
  CHECK(best.should_stop());                        // patience 2
  CHECK(best.restore(m, 3, no_folder) == 1);
  CHECK(weights_of(m) == first);
  // The LSH tables came back with the weights: inference through them ranks as after epoch 1.
  const train::EvalResult again = t.evaluate(d.test, {.inference = Inference::lsh});
  CHECK(again.p(1) == first_scores.p(1));
  CHECK(again.p(5) == first_scores.p(5));
  // The state a checkpoint records, and a resumed run's.
  train::BestEpoch resumed(2, "");
  resumed.resume(best.run_state());
  CHECK(resumed.state().best_epoch == 1);
  CHECK(resumed.state().epochs_without_improvement == 2);
  CHECK(resumed.should_stop());
}

TEST_CASE("served checkpoint: the folder serves its run's best epoch, never another run's best/") {
  set_threads(host_backend(), 1);
  const data::SynthXmc d = small_set();
  const std::string dir = "best_epoch_test_ckpt";
  fs::remove_all(dir);
  Model m;
  layers::build_network(m, kSpec, Placement{});
  train::Trainer t(m, {});
  const nlohmann::json config = layers::network_config(kSpec);
  train::BestEpoch best(0, dir + "/best");
  const auto save_best = [&](const std::string& best_dir) { train::save_checkpoint(best_dir, m, t, config, best.run_state()); };
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    t.fit_epoch(d.train, {.batch = 64, .seed = epoch, .progress = false});
    best.record(epoch, epoch == 2 ? 0.9 : 0.1 * static_cast<double>(epoch), m, save_best);
    train::save_checkpoint(dir, m, t, config, best.run_state());
  }
  const train::ServedCheckpoint served = train::served_checkpoint(dir);
  CHECK(served.best);
  CHECK(served.epoch == 2);
  CHECK(served.newest_epoch == 3);
  CHECK(served.dir == dir + "/best");
  CHECK(train::Predictor(dir).epoch() == 2);
  CHECK(train::Predictor(dir).served().best);
  // A new run into the same folder (another run id): the old best/ is not its best.
  Model m2;
  layers::build_network(m2, kSpec, Placement{});
  train::Trainer t2(m2, {});
  t2.fit_epoch(d.train, {.batch = 64, .seed = 9, .progress = false});
  train::BestEpoch other(0, "");
  other.record(1, 0.1, m2, [](const std::string&) {});
  t2.fit_epoch(d.train, {.batch = 64, .seed = 10, .progress = false});
  other.record(2, 0.0, m2, [](const std::string&) {});  // its best is epoch 1, and best/ holds epoch 2 of the first run
  train::save_checkpoint(dir, m2, t2, config, other.run_state());
  const train::ServedCheckpoint newest = train::served_checkpoint(dir);
  CHECK_FALSE(newest.best);
  CHECK(newest.dir == dir);
  CHECK(train::Predictor(dir).epoch() == 2);
  fs::remove_all(dir);
}

TEST_CASE("ensemble choice: the grid's best blend on the validation set, the base blend first") {
  set_threads(host_backend(), 1);
  const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 600, .labels = 120, .train = 480, .test = 200, .nnz = 15, .labels_per_point = 1, .seed = 9});
  Model m;
  layers::build_network(m, kSpec, Placement{});
  train::Trainer t(m, {});
  t.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false, .max_steps = 2});  // barely trained
  const data::LabelCentroids centroids(d.train);
  const data::NearestPoints near(d.train);
  const train::EnsembleOptions base{.weight = 0.0f, .knn_weight = 0.0f, .temperature = 0.05f, .candidates = 20};
  const std::vector<train::EnsembleOptions> grid = train::ensemble_grid(base, {&centroids, &near});
  REQUIRE(grid.size() > 40);
  CHECK((grid.front().weight == 0.0f && grid.front().knn_weight == 0.0f));
  CHECK(train::ensemble_grid(base, {&centroids, nullptr}).size() < grid.size());  // no kNN: not tried
  train::EnsembleChoice choice({&centroids, &near}, base, d.test, 64);
  train::EnsembleScore base_score;
  const train::EnsembleScore chosen = choice.choose(t, &base_score);
  // The base blend is the network alone, barely trained: the members rank this clean set far
  // better, and the choice says so; its score is what the chosen blend evaluates to.
  CHECK(chosen.score() >= base_score.score());
  CHECK(chosen.options.weight + chosen.options.knn_weight > 0.0f);
  CHECK(chosen.p1 > base_score.p1 + 0.1);
  const train::EnsembleRanker ranker({&centroids, &near}, chosen.options);
  const train::EvalResult blended = t.evaluate(d.test, {.k = {1, 5}, .ensemble = &ranker});
  CHECK(blended.p(1) == Approx(chosen.p1).margin(1e-9));
  CHECK(blended.p(5) == Approx(chosen.p5).margin(1e-9));
  // Deterministic: the same choice again, whatever the threads.
  set_threads(host_backend(), 2);
  CHECK(choice.choose(t).index == chosen.index);
  set_threads(host_backend(), 1);
}

TEST_CASE("validation split: the held-back points never train (the run equals one on the rest alone)") {
  const data::SynthXmc d = small_set();
  run::TrainConfig c;
  c.train = "train";
  c.test = "test";
  c.epochs = 2;
  c.hidden = 16;
  c.threads = 1;
  c.quiet = true;
  c.seed = 3;
  c.valid_fraction = 0.25;
  c.early_stopping = 0;
  const run::RunResult with_split = run::train(c, d.train, d.test);
  REQUIRE(with_split.epochs.size() == 2);
  CHECK(with_split.epochs[0].valid_p1.has_value());
  // The same training on the training part alone (the split is a function of the data, the share
  // and the seed: the same on every rank and on --resume).
  const data::Split split = run::hold_back(d.train, 0.25, 3);
  CHECK(split.test.size() == 150);
  run::TrainConfig alone = c;
  alone.valid_fraction = 0.0;
  const run::RunResult without = run::train(alone, split.train, d.test);
  // The first epoch's model: the same bits (the second run returns its last epoch; the first its
  // best on validation, which the test compares only when it is the last).
  CHECK(with_split.epochs[0].loss == without.epochs[0].loss);
  CHECK(with_split.epochs[0].p1 == without.epochs[0].p1);
  CHECK(with_split.epochs[1].loss == without.epochs[1].loss);
  if (with_split.model_epoch == 2) CHECK(weights_of(with_split.model->model) == weights_of(without.model->model));
  CHECK(without.model_epoch == 2);
}
