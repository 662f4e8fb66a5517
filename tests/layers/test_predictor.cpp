// Predictor: a checkpoint loaded for inference gives the top-k the trainer computes; checkpoints
// saved by several ranks (uneven slices) load on one rank, one rank's on several, and a model sliced
// over a group returns the same labels on every rank. Ranks are threads (LocalCommunicator).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/data/batch_loader.h"
#include "train/checkpoint_manifest.h"
#include "core/data/label_counts_file.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/predictor.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 600, .labels = 120, .train = 640, .test = 100, .nnz = 15, .labels_per_point = 2, .seed = 3});
  return d;
}

const layers::NetworkSpec kSpec{.features = 600, .labels = 120, .hidden = 16, .sampler = "lsh", .tables = 8,
                                .seed = 5};

// The test points as one batch.
SparseBatch test_batch() {
  SparseBatch b;
  std::vector<uint32_t> all(problem().test.size());
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  problem().test.gather(all, b);
  return b;
}

struct Top {
  std::vector<uint32_t> labels;
  std::vector<float> scores;
};

// Trains `ranks` ranks (slice weights `weights`) for 10 steps, saves a checkpoint in `dir` with the
// network's config, and returns the trainer's top 5 of the test points (every rank agrees).
Top train_and_save(const std::string& dir, int ranks, std::vector<double> weights) {
  fs::remove_all(dir);
  Top top;
  std::mutex mu;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    Model m;
    layers::build_network(m, kSpec, Placement::sliced(c, weights));
    train::Trainer t(m, {.parallel = {.model = &c}});
    data::BatchLoader loader(problem().train, {.batch = 64, .seed = 2});
    SparseBatch batch;
    for (int s = 0; s < 10 && loader.next(batch); ++s) t.train_step(batch);
    train::save_checkpoint(dir, m, t, layers::network_config(kSpec));
    Top mine;
    t.predict(test_batch(), 5, mine.labels, mine.scores);
    std::lock_guard<std::mutex> lock(mu);
    if (c.rank() == 0) top = mine;
  });
  return top;
}

void require_same(const train::Predictions& got, const Top& want, double tolerance) {
  REQUIRE(got.k == 5);
  REQUIRE(got.size() == problem().test.size());
  REQUIRE(got.labels == want.labels);
  for (size_t i = 0; i < want.scores.size(); ++i) REQUIRE(got.scores[i] == Approx(want.scores[i]).epsilon(tolerance));
}

}  // namespace

TEST_CASE("predictor: top-k and metrics equal the trainer's on one rank") {
  host_backend().set_num_threads(1);
  const std::string dir = "predictor_test_one";
  fs::remove_all(dir);
  Model m;
  layers::build_network(m, kSpec, Placement{});
  train::Trainer t(m, {});
  t.fit_epoch(problem().train, {.batch = 64, .seed = 1, .progress = false, .max_steps = 10});
  train::save_checkpoint(dir, m, t, layers::network_config(kSpec));
  Top want;
  t.predict(test_batch(), 5, want.labels, want.scores);
  train::Predictor p(dir);
  CHECK(p.num_features() == 600);
  CHECK(p.num_labels() == 120);
  CHECK(p.step() == 10);
  CHECK(p.saved_slices() == 1);
  CHECK_FALSE(p.label_counts());  // none saved
  require_same(p.top_k(test_batch(), 5), want, 0);  // the same weights and kernels: the same bits
  const Propensities props(LabelCounts::of(problem().train));
  const train::EvalResult ev = t.evaluate(problem().test, {.propensities = &props});
  const RankingScores got = p.evaluate(problem().test, {1, 3, 5}, &props);
  CHECK(got.precision == ev.precision);
  CHECK(got.ndcg == ev.ndcg);
  CHECK(got.psp == ev.psp);
  CHECK(got.psp.size() == 3);
  // Label counts saved next to the checkpoint come back with it, once a checkpoint records them
  // (train/checkpoint_manifest.h: files beside a checkpoint belong to its run).
  save_label_counts(dir, LabelCounts::of(problem().train));
  CHECK_THROWS_WITH(train::Predictor(dir), Catch::Contains("label_counts.bin: manifest.json does not list it"));
  CHECK(train::Predictor(dir, {.accept_unchecked_checkpoint = true}).label_counts());
  train::save_checkpoint(dir, m, t, layers::network_config(kSpec));
  const train::Predictor with_counts(dir);
  REQUIRE(with_counts.label_counts());
  CHECK(with_counts.label_counts()->per_label == LabelCounts::of(problem().train).per_label);
  CHECK(with_counts.label_counts()->points == problem().train.size());
  fs::remove_all(dir);
}

TEST_CASE("predictor: a checkpoint of 3 uneven slices loads on 1, 2 and 3 ranks; 1 rank's on 2") {
  host_backend().set_num_threads(1);
  const std::string dir = "predictor_test_three";
  const Top want = train_and_save(dir, 3, {1, 2, 3});
  require_same(train::Predictor(dir).top_k(test_batch(), 5), want, 1e-5);
  for (const int ranks : {2, 3}) {  // 3 ranks with equal slices: the same count, other bounds
    INFO(ranks << " ranks");
    // Every rank gets the merged result (Catch's checks are not thread-safe: they run afterwards).
    std::vector<train::Predictions> got(ranks);
    comm::run_local(ranks, [&](comm::Communicator& c) { got[c.rank()] = train::Predictor(dir, {.group = &c}).top_k(test_batch(), 5); });
    for (const train::Predictions& g : got) require_same(g, want, 1e-5);
  }
  const std::string one = "predictor_test_from_one";
  const Top single = train_and_save(one, 1, {});
  std::vector<train::Predictions> got(2);
  comm::run_local(2, [&](comm::Communicator& c) { got[c.rank()] = train::Predictor(one, {.group = &c}).top_k(test_batch(), 5); });
  for (const train::Predictions& g : got) require_same(g, single, 1e-5);
  fs::remove_all(dir);
  fs::remove_all(one);
}

TEST_CASE("predictor: clear errors for missing, damaged or unbuildable checkpoints and bad points") {
  host_backend().set_num_threads(1);
  CHECK_THROWS_WITH(train::Predictor("predictor_test_missing"), Catch::Contains("predictor_test_missing: no checkpoint here"));
  const std::string dir = "predictor_test_errors";
  fs::remove_all(dir);
  Model m;
  layers::build_network(m, kSpec, Placement{});
  train::Trainer t(m, {});
  train::save_checkpoint(dir, m, t);  // through the API, without a config
  CHECK_THROWS_WITH(train::Predictor(dir), Catch::Contains("manifest.json: the checkpoint's config lacks 'features'"));
  // The build callback rebuilds what the manifest does not describe.
  train::Predictor built(dir, {.build = [](Model& model, const Placement& pl) { layers::build_network(model, kSpec, pl); }});
  SparseBatch bad;
  const uint32_t ids[] = {3, 600};
  const float vals[] = {1, 1};
  bad.add_point({}, {}, {});
  bad.add_point(ids, vals, {});
  CHECK_THROWS_WITH(built.top_k(bad, 3), Catch::Contains("point 1 of the batch: feature id 600 >= the model's 600"));
  // A model of another shape than the checkpoint's: the slice file names the parameter.
  layers::NetworkSpec wider = kSpec;
  wider.hidden = 32;
  CHECK_THROWS_WITH(train::Predictor(dir, {.build = [&](Model& model, const Placement& pl) {
                                      layers::build_network(model, wider, pl);
                                    }}),
                    Catch::Contains("slice0.ckpt: parameter sparse_dense.weight has another shape"));
  train::save_checkpoint(dir, m, t, layers::network_config(kSpec));
  { std::ofstream(dir + "/manifest.json") << "{ not json"; }
  CHECK_THROWS_WITH(train::Predictor(dir), Catch::Contains("manifest.json: corrupt manifest"));
  fs::remove_all(dir);
}
