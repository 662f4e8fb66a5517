// The trainer with every optimizer and regularization option on: resume from a checkpoint is
// bit-identical (catch-up rows, AdamW, cosine schedule with warm-up, clipping, dropout; SGD and
// Adagrad too),
// runs reproduce, evaluation never drops inputs, and checkpoints of another optimizer are refused
// or converted.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include "core/data/batch_loader.h"
#include "train/checkpoint_manifest.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/xmc_network.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

constexpr size_t kBatch = 64, kEpochs = 2;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 3000, .labels = 400, .train = 1600, .test = 300, .nnz = 20, .labels_per_point = 3, .seed = 6});
  return d;
}

layers::XmcNetworkOptions net(layers::Sampler sampler) {
  return {.features = 3000, .labels = 400, .hidden = 32, .sampler = sampler,
          .lsh = {.family = lsh::Dwta{.k = 3}, .tables = 16, .min_active = 40}, .seed = 4};
}

train::TrainerOptions every_option(const optim::Options& optimizer) {
  const uint64_t steps = kEpochs * ((problem().train.size() + kBatch - 1) / kBatch);
  train::TrainerOptions o;
  o.optimizer = optimizer;
  o.lr_schedule = {.kind = optim::ScheduleKind::cosine, .warmup_steps = 10, .total_steps = steps};
  o.clip_norm = 0.5f;
  o.dropout = {.p = 0.2f, .seed = 11};
  return o;
}

std::vector<const Tensor*> weights(Model& m) {
  std::vector<const Tensor*> out;
  for (const Parameter* p : m.parameters()) out.push_back(&p->value);
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}

}  // namespace

TEST_CASE("trainer options: resume with every option on is bit-identical to an uninterrupted run") {
  host_backend().set_num_threads(2);
  const std::string dir = "trainer_options_resume_ckpt";
  const std::vector<optim::Options> optimizers{
      optim::Adam{.lr = 3e-3f, .weight_decay = 0.01f, .updates = optim::SparseUpdates::catchup},
      optim::Sgd{.lr = 0.5f, .momentum = 0.9f, .weight_decay = 1e-3f, .updates = optim::SparseUpdates::catchup},
      optim::Adagrad{.lr = 0.05f, .weight_decay = 1e-3f, .updates = optim::SparseUpdates::catchup},
  };
  for (const auto& optimizer : optimizers)
    for (const auto sampler : {layers::Sampler::lsh, layers::Sampler::exact}) {
      INFO(optim::to_string(optimizer.method) << (sampler == layers::Sampler::lsh ? " lsh" : " exact"));
      fs::remove_all(dir);
      const train::TrainerOptions options = every_option(optimizer);
      Model straight;
      layers::build_xmc_network(straight, net(sampler));
      train::Trainer a(straight, options);
      std::vector<double> losses;
      for (uint64_t e = 1; e <= kEpochs; ++e)
        losses.push_back(a.fit_epoch(problem().train, {.batch = kBatch, .seed = e, .progress = false}).loss);
      REQUIRE(losses[1] < losses[0]);
      {
        Model m;
        layers::build_xmc_network(m, net(sampler));
        train::Trainer t(m, options);
        t.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
        train::save_checkpoint(dir, m, t);
      }
      Model resumed;
      layers::build_xmc_network(resumed, net(sampler));
      train::Trainer b(resumed, options);
      train::load_checkpoint(dir, resumed, b);
      REQUIRE(b.step() == a.step() / 2);
      REQUIRE(b.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false}).loss == losses[1]);
      const auto wa = weights(straight), wb = weights(resumed);
      for (size_t i = 0; i < wa.size(); ++i) REQUIRE(bitwise_equal(*wa[i], *wb[i]));
      for (size_t i = 0; i < a.optimizer().size(); ++i) {
        REQUIRE(bitwise_equal(a.optimizer().state(i).m, b.optimizer().state(i).m));
        REQUIRE(a.optimizer().state(i).row_steps == b.optimizer().state(i).row_steps);
      }
    }
  fs::remove_all(dir);
}

TEST_CASE("trainer options: the epoch ends with every row caught up; clipping is reported") {
  Model m;
  layers::build_xmc_network(m, net(layers::Sampler::lsh));
  train::Trainer t(m, every_option(optim::Adam{.updates = optim::SparseUpdates::catchup}));
  const train::FitResult fit = t.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false, .max_steps = 7});
  for (size_t i = 0; i < t.optimizer().size(); ++i)
    for (const uint32_t s : t.optimizer().state(i).row_steps) REQUIRE(s == 7);
  REQUIRE(fit.grad_norm > 0);
  REQUIRE(fit.clipped_steps <= 7);
}

TEST_CASE("trainer options: dropout acts in training only") {
  Model plain_model, dropout_model;
  layers::build_xmc_network(plain_model, net(layers::Sampler::exact));
  layers::build_xmc_network(dropout_model, net(layers::Sampler::exact));
  train::Trainer plain(plain_model, {}), dropping(dropout_model, {.dropout = {.p = 0.5f, .seed = 3}});
  data::BatchLoader loader(problem().train, {.batch = kBatch, .seed = 1});
  SparseBatch batch;
  loader.next(batch);
  REQUIRE(plain.loss(batch) == dropping.loss(batch));  // evaluation: the inputs as they are
  REQUIRE(plain.compute_gradients(batch) != dropping.compute_gradients(batch));
  REQUIRE(plain.evaluate(problem().test, {}).p(1) == dropping.evaluate(problem().test, {}).p(1));
}

TEST_CASE("trainer options: a checkpoint of another optimizer is refused; lazy state resumes under catch-up") {
  const std::string dir = (fs::temp_directory_path() / ("frugal_trainer_options_kind_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  Model m;
  layers::build_xmc_network(m, net(layers::Sampler::lsh));
  train::Trainer lazy(m, {.optimizer = optim::Adam{}});
  lazy.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false, .max_steps = 5});
  train::save_checkpoint(dir, m, lazy);
  Model other;
  layers::build_xmc_network(other, net(layers::Sampler::lsh));
  train::Trainer sgd(other, {.optimizer = optim::Sgd{}});
  REQUIRE_THROWS_WITH(train::load_checkpoint(dir, other, sgd), Catch::Contains("holds adam state, this run uses sgd"));
  // Refused by the manifest's method, not by the state's shape (Adagrad's one tensor per parameter
  // would fit an SGD checkpoint).
  train::Trainer adagrad(other, {.optimizer = optim::Adagrad{}});
  REQUIRE_THROWS_WITH(train::load_checkpoint(dir, other, adagrad), Catch::Contains("holds adam state, this run uses adagrad"));
  train::Trainer catchup(other, {.optimizer = optim::Adam{.updates = optim::SparseUpdates::catchup}});
  train::load_checkpoint(dir, other, catchup);
  REQUIRE(train::read_manifest(dir).optimizer.at("sparse_updates") == "lazy");
  // Lazy rows owe nothing: they count as up to date at the checkpoint's step.
  for (size_t i = 0; i < catchup.optimizer().size(); ++i)
    for (const uint32_t s : catchup.optimizer().state(i).row_steps) REQUIRE(s == 5);
  REQUIRE_NOTHROW(catchup.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false, .max_steps = 3}));
  fs::remove_all(dir);
}
