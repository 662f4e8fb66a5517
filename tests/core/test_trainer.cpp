// End-to-end behaviour of the trainer on small generated problems: learning in both sampler modes,
// bitwise determinism per seed, and resume == uninterrupted run.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/data/batch_loader.h"
#include "train/checkpoint_manifest.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

const data::SynthXmc& small_problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 5000, .labels = 1000, .train = 10000, .test = 1000, .nnz = 40, .labels_per_point = 3, .seed = 4});
  return d;
}

layers::XmcNetworkOptions net(layers::Sampler sampler) {
  return {.features = 5000, .labels = 1000, .hidden = 64, .sampler = sampler,
          .lsh = {.family = lsh::auto_family(lsh::Dwta{}, 50, 1000), .tables = 50, .min_active = 300,
                  .max_active = 300},
          .seed = 9};
}

std::vector<double> losses_after(layers::Sampler sampler, size_t steps) {
  Model model;
  layers::build_xmc_network(model, net(sampler));
  train::Trainer trainer(model, {});
  data::BatchLoader loader(small_problem().train, {.batch = 64, .seed = 3});
  std::vector<double> out;
  SparseBatch batch;
  while (out.size() < steps && loader.next(batch)) out.push_back(trainer.train_step(batch));
  return out;
}

}  // namespace

TEST_CASE("trainer: P@1 >= 0.9 within a few epochs, exact and LSH samplers") {
  host_backend().set_num_threads(2);
  for (const auto sampler : {layers::Sampler::exact, layers::Sampler::lsh}) {
    Model model;
    layers::build_xmc_network(model, net(sampler));
    train::Trainer trainer(model, {.optimizer = {.lr = 2e-3f}});
    double p1 = 0;
    for (int epoch = 1; epoch <= 5 && p1 < 0.9; ++epoch) {
      trainer.fit_epoch(small_problem().train, {.batch = 64, .seed = uint64_t(epoch), .progress = false});
      p1 = trainer.evaluate(small_problem().test, {}).p(1);
    }
    INFO("sampler " << (sampler == layers::Sampler::lsh ? "lsh" : "exact"));
    REQUIRE(p1 >= 0.9);
  }
}

TEST_CASE("trainer: same seed gives bitwise-identical losses") {
  for (const auto sampler : {layers::Sampler::exact, layers::Sampler::lsh}) {
    const auto a = losses_after(sampler, 30), b = losses_after(sampler, 30);
    REQUIRE(a.size() == 30);
    REQUIRE(a == b);
  }
}

TEST_CASE("trainer: resume from a checkpoint continues bit-identically") {
  namespace fs = std::filesystem;
  const std::string dir = "trainer_resume_test_ckpt";
  fs::remove_all(dir);
  const auto& d = small_problem();
  for (const auto sampler : {layers::Sampler::lsh, layers::Sampler::exact}) {
    // Uninterrupted: two epochs.
    Model straight;
    layers::build_xmc_network(straight, net(sampler));
    train::Trainer t1(straight, {});
    t1.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false});
    const double loss2 = t1.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false}).loss;
    // Interrupted: one epoch, checkpoint, a fresh process-like model, resume, second epoch.
    {
      Model m;
      layers::build_xmc_network(m, net(sampler));
      train::Trainer t(m, {});
      t.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false});
      train::save_checkpoint(dir, m, t, {{"hidden", 64}});
    }
    Model resumed;
    layers::build_xmc_network(resumed, net(sampler));
    train::Trainer t2(resumed, {});
    const auto info = train::load_checkpoint(dir, resumed, t2, {{"hidden", 64}});
    REQUIRE(info.epoch == 1);
    const double resumed_loss2 = t2.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false}).loss;
    REQUIRE(resumed_loss2 == loss2);
    const auto pa = straight.parameters(), pb = resumed.parameters();
    for (size_t i = 0; i < pa.size(); ++i) REQUIRE(std::equal(pa[i]->value.data(), pa[i]->value.data() + pa[i]->value.size(), pb[i]->value.data()));
    // A checkpoint made with other settings is refused, naming the setting.
    REQUIRE_THROWS_WITH(train::load_checkpoint(dir, resumed, t2, {{"hidden", 128}}), Catch::Contains("hidden = 64"));
  }
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: an interrupted save leaves the previous checkpoint intact; corrupt files are named") {
  namespace fs = std::filesystem;
  const std::string dir = "checkpoint_corrupt_test";
  fs::remove_all(dir);
  Model m;
  layers::build_xmc_network(m, net(layers::Sampler::exact));
  train::Trainer t(m, {});
  train::save_checkpoint(dir, m, t);
  const std::string slice = dir + "/epoch-0-step-0/slice0.ckpt";
  REQUIRE(fs::exists(slice));
  // A leftover temporary file from a crashed save does not affect loading.
  { std::ofstream(slice + ".tmp") << "partial"; }
  REQUIRE_NOTHROW(train::load_checkpoint(dir, m, t));
  // A save that died before its manifest was written leaves the previous checkpoint in force.
  fs::create_directories(dir + "/epoch-1-step-9");
  { std::ofstream(dir + "/epoch-1-step-9/slice0.ckpt") << "half-written"; }
  REQUIRE_NOTHROW(train::load_checkpoint(dir, m, t));
  // Truncate the real file: the error names it.
  fs::resize_file(slice, fs::file_size(slice) / 2);
  REQUIRE_THROWS_WITH(train::load_checkpoint(dir, m, t), Catch::Contains("slice0.ckpt") && Catch::Contains("truncated or corrupt"));
  { std::ofstream(dir + "/manifest.json") << "{ not json"; }
  REQUIRE_THROWS_WITH(train::load_checkpoint(dir, m, t), Catch::Contains("corrupt manifest"));
  REQUIRE_THROWS_WITH(train::load_checkpoint("no_such_dir", m, t), Catch::Contains("no checkpoint here"));
  fs::remove_all(dir);
}

// issue 62: a step whose loss is not finite stops the epoch (DivergenceError naming the epoch and
// step) or, with OnDivergence::skip_batch, leaves the weights as they were and is counted.
TEST_CASE("trainer: divergence stops the epoch, or its batches are skipped without moving a weight") {
  host_backend().set_num_threads(1);
  data::Dataset poisoned = small_problem().train;
  // One point of the third batch gets a NaN value (the readers refuse one; data built in memory
  // may hold it): its batch's loss is NaN.
  const size_t point = 2 * 64 + 5;
  poisoned.points.feature_values[poisoned.points.feature_offsets[point]] = std::nanf("");
  const train::FitOptions fit{.batch = 64, .shuffle = false, .progress = false, .max_steps = 6};
  {  // A learning rate far too high: the loss overflows within a few steps.
    Model model;
    layers::build_xmc_network(model, net(layers::Sampler::exact));
    train::Trainer trainer(model, {.optimizer = {.lr = 1e30f}});
    CHECK_THROWS_AS(trainer.fit_epoch(small_problem().train, fit), train::DivergenceError);
    Model again;
    layers::build_xmc_network(again, net(layers::Sampler::exact));
    CHECK_THROWS_WITH(train::Trainer(again, {.optimizer = {.lr = 1e30f}}).fit_epoch(small_problem().train, fit),
                      Catch::Contains("epoch 1, step ") && Catch::Contains("training diverged") &&
                          Catch::Contains("lr 1e+30"));
  }
  {  // One step that moves the weights far beyond any trained model's after its loss was computed:
     // no loss shows it, the weights' check at the epoch's end does.
    Model model;
    layers::build_xmc_network(model, net(layers::Sampler::exact));
    train::Trainer trainer(model, {.optimizer = {.lr = 1e19f}});
    CHECK_THROWS_WITH(trainer.fit_epoch(small_problem().train, {.batch = 64, .progress = false, .max_steps = 1}),
                      Catch::Contains("epoch 1 (after its last step): the model's weights"));
  }
  Model model;
  layers::build_xmc_network(model, net(layers::Sampler::exact));
  train::Trainer trainer(model, {.on_divergence = train::OnDivergence::skip_batch});
  const train::FitResult r = trainer.fit_epoch(poisoned, fit);
  CHECK(r.skipped_batches == 1);
  CHECK(r.diverged_step == 3);
  CHECK(r.steps == 6);
  CHECK(r.samples == 5 * 64);
  CHECK(std::isfinite(r.loss));
  for (const Parameter* p : model.parameters())
    REQUIRE(std::all_of(p->value.span().begin(), p->value.span().end(), [](float w) { return std::isfinite(w); }));
  // The same five batches without the poisoned one train the same weights as skipping it.
  Model clean_model;
  layers::build_xmc_network(clean_model, net(layers::Sampler::exact));
  train::Trainer clean(clean_model, {});
  data::BatchLoader loader(small_problem().train, {.batch = 64, .shuffle = false});
  SparseBatch batch;
  for (int s = 0; s < 6 && loader.next(batch); ++s)
    if (s != 2) clean.train_step(batch);
  const auto mine = model.parameters(), theirs = clean_model.parameters();
  for (size_t i = 0; i < mine.size(); ++i) {
    const Tensor &a = mine[i]->value, &b = theirs[i]->value;
    REQUIRE(a.size() == b.size());
    REQUIRE(std::equal(a.span().begin(), a.span().end(), b.span().begin()));
  }
}
