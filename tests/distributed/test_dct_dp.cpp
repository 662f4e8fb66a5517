// DCT-DP in the trainer: replicas threshold their gradients with error feedback and exchange only
// what passes. keep = 1 must reproduce the uncompressed replica sum exactly (2 replicas, with and
// without model slicing); thresholded runs are deterministic, learn and compress; contradictory
// settings fail clearly. Ranks are threads (LocalCommunicator).
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>
#include <optional>

#include "comm/local_communicator.h"
#include "train/checkpoint.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/mlp_network.h"
#include "layers/xmc_network.h"
#include "tests/distributed/whole_weights.h"

using namespace frugal;

namespace {

constexpr size_t kFeatures = 600, kLabels = 200, kHidden = 16, kBatch = 32;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = 30 * kBatch, .test = 200, .nnz = 15,
       .labels_per_point = 3, .seed = 6});
  return d;
}

struct Run {
  std::vector<double> losses;                 // per epoch
  std::map<std::string, Tensor> weights;      // replica 0's slices, gathered whole
  std::map<std::string, Tensor> last_replica; // the last replica's, the same way
  double p1 = 0;
  train::FitResult fit;                              // rank 0's last epoch
};

// base: the trainer's other options (optimizer, clipping); parallel and dp are set here.
Run run_training(int replicas, int slices, std::optional<comm::DpCompression> dp, int epochs = 2, train::TrainerOptions base = {}) {
  Run run;
  std::mutex mu;
  comm::run_local(replicas * slices, [&](comm::Communicator& world) {
    const int w = world.rank();
    auto model_group = world.split(w / slices, w);
    auto data_group = world.split(w % slices, w);
    Model m;
    layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                  .sampler = layers::Sampler::exact, .seed = 3,
                                  .placement = Placement::sliced(*model_group)});
    train::TrainerOptions options = base;
    options.parallel = {.model = model_group.get(), .data = data_group.get()};
    options.dp = dp;
    train::Trainer t(m, options);
    std::vector<double> losses;
    train::FitResult fit;
    for (int e = 0; e < epochs; ++e) {
      fit = t.fit_epoch(problem().train, {.batch = kBatch, .seed = 10u + e, .progress = false});
      losses.push_back(fit.loss);
    }
    const double p1 = t.evaluate(problem().test, {}).p(1);
    std::lock_guard<std::mutex> lock(mu);
    if (w / slices == 0) testing::add_slices(m, run.weights);
    if (w / slices == replicas - 1) testing::add_slices(m, run.last_replica);
    if (w == 0) {
      run.losses = losses;
      run.p1 = p1;
      run.fit = fit;
    }
  });
  return run;
}

void require_identical(const Run& a, const Run& b) {
  REQUIRE(a.losses == b.losses);
  REQUIRE(a.p1 == b.p1);
  for (const auto& [name, w] : a.weights) {
    INFO(name);
    const Tensor& o = b.weights.at(name);
    REQUIRE(w.size() == o.size());
    REQUIRE(std::equal(w.data(), w.data() + w.size(), o.data()));
  }
}

}  // namespace

TEST_CASE("DCT-DP: --dp-keep 1 reproduces the uncompressed replica sum exactly (grids 2x1 and 2x2)") {
  host_backend().set_num_threads(1);
  for (const int slices : {1, 2}) {
    INFO("grid 2x" << slices);
    const Run plain = run_training(2, slices, std::nullopt);
    const Run keep_all = run_training(2, slices, comm::DpCompression{.keep = 1.0f});
    require_identical(keep_all, plain);
    REQUIRE(keep_all.fit.dp_compression() > 0.0);
  }
}

TEST_CASE("DCT-DP: thresholded training is deterministic, learns and cuts the traffic") {
  host_backend().set_num_threads(1);
  const comm::DpCompression dct{.keep = 0.01f, .reestimate_every = 10};
  const Run a = run_training(2, 1, dct), b = run_training(2, 1, dct);
  require_identical(a, b);
  const Run plain = run_training(2, 1, std::nullopt);
  INFO("dp compression " << a.fit.dp_compression() << ", P@1 " << a.p1 << " vs " << plain.p1);
  REQUIRE(a.losses.back() < a.losses.front());
  REQUIRE(a.fit.dp_compression() > 20.0);
  REQUIRE(a.fit.dp_bytes_sent * 5 < plain.fit.dp_bytes_sent);
  REQUIRE(a.p1 > 0.5 * plain.p1);
}

TEST_CASE("DCT-DP: exact top-k every step, bf16 values, 4 replicas") {
  host_backend().set_num_threads(1);
  const Run exact = run_training(2, 1, comm::DpCompression{.keep = 0.05f, .reestimate_every = 1, .exact_tau = true}, 1);
  REQUIRE(exact.fit.dp_compression() > 5.0);
  const Run half = run_training(4, 1, comm::DpCompression{.keep = 0.05f, .reestimate_every = 5, .wire = comm::ValueType::bf16}, 1);
  REQUIRE(std::isfinite(half.losses.back()));
  REQUIRE(half.fit.dp_compression() > 5.0);
}

TEST_CASE("DCT-DP over optimizer updates: replicas stay identical, runs are deterministic, learn and compress") {
  host_backend().set_num_threads(1);
  for (const int slices : {1, 2}) {
    INFO("grid 2x" << slices);
    const comm::DpCompression dct{.keep = 0.01f, .reestimate_every = 1, .wire = comm::ValueType::bf16,
                                  .target = comm::DpTarget::updates};
    const Run a = run_training(2, slices, dct), b = run_training(2, slices, dct);
    require_identical(a, b);
    for (const auto& [name, w] : a.weights) {  // every replica applied the same averaged update
      INFO(name);
      const Tensor& other = a.last_replica.at(name);
      REQUIRE(std::equal(w.data(), w.data() + w.size(), other.data()));
    }
    const Run plain = run_training(2, slices, std::nullopt);
    INFO("dp compression " << a.fit.dp_compression() << ", P@1 " << a.p1 << " vs " << plain.p1);
    REQUIRE(a.losses.back() < a.losses.front());
    REQUIRE(a.fit.dp_compression() > 20.0);
    REQUIRE(a.p1 > 0.5 * plain.p1);
  }
}

TEST_CASE("DCT-DP over optimizer updates at keep 1 is the mean of the replicas' own optimizer steps") {
  // Two replicas that see the same points take the same local step, so their mean is that step: the
  // run equals single-process training on those points, bit for bit.
  host_backend().set_num_threads(1);
  const data::Dataset& train_set = problem().train;
  std::vector<double> losses[2];
  std::map<std::string, Tensor> weights[2];
  for (const int replicas : {1, 2}) {
    std::mutex mu;
    comm::run_local(replicas, [&](comm::Communicator& c) {
      Model m;
      layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                    .sampler = layers::Sampler::exact, .seed = 3});
      std::optional<comm::DpCompression> dp;
      if (replicas == 2) dp = comm::DpCompression{.keep = 1.0f, .target = comm::DpTarget::updates};
      train::Trainer t(m, {.parallel = {.data = replicas == 2 ? &c : nullptr}, .dp = dp});
      std::vector<double> mine;
      for (size_t first = 0; first + kBatch <= 8 * kBatch; first += kBatch) {
        std::vector<uint32_t> ids(kBatch);
        for (size_t i = 0; i < kBatch; ++i) ids[i] = static_cast<uint32_t>(first + i);
        SparseBatch batch;
        train_set.gather(ids, batch);
        mine.push_back(t.train_step(batch, kBatch));  // each replica: the whole batch, the same scale
      }
      std::lock_guard<std::mutex> lock(mu);
      if (c.rank() == 0) {
        losses[replicas - 1] = mine;
        testing::add_slices(m, weights[replicas - 1]);
      }
    });
  }
  REQUIRE(losses[0] == losses[1]);
  for (const auto& [name, w] : weights[0]) {
    INFO(name);
    const Tensor& o = weights[1].at(name);
    REQUIRE(std::equal(w.data(), w.data() + w.size(), o.data()));
  }
}

TEST_CASE("DCT-DP over optimizer updates refuses catch-up sparse updates") {
  Model m;
  layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden});
  optim::Options catchup;
  catchup.updates = optim::SparseUpdates::catchup;
  REQUIRE_THROWS_WITH(train::Trainer(m, {.optimizer = catchup,
                                  .dp = comm::DpCompression{.keep = 0.1f, .target = comm::DpTarget::updates}}),
                      Catch::Contains("--dp-compress updates") && Catch::Contains("lazy"));
}

TEST_CASE("DCT-DP: thresholds and the dense all-reduce baseline contradict each other") {
  Model m;
  layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden});
  REQUIRE_THROWS_WITH(train::Trainer(m, {.parallel = {.dense_gradients = true}, .dp = comm::DpCompression{.keep = 0.1f}}),
                      Catch::Contains("dp") && Catch::Contains("parallel.dense_gradients"));
}

TEST_CASE("DCT-DP: a checkpoint keeps every replica's residuals; resuming on the same grid is bit-identical") {
  host_backend().set_num_threads(1);
  // updates: each replica's own optimizer state too; momentum correction: each replica's velocity.
  const auto [target, momentum] = GENERATE(std::pair{comm::DpTarget::gradients, false},
                                           std::pair{comm::DpTarget::updates, false},
                                           std::pair{comm::DpTarget::gradients, true});
  INFO("--dp-compress " << comm::to_string(target) << ", momentum correction " << momentum);
  const comm::DpCompression dct{.keep = 0.02f, .reestimate_every = 7, .target = target,
                                .momentum_correction = momentum};
  const Run whole = run_training(2, 2, dct, 2);
  const std::string dir = (std::filesystem::temp_directory_path() / "frugal-test-dct-ckpt").string();
  std::filesystem::remove_all(dir);
  Run resumed;
  std::mutex mu;
  auto session = [&](int epochs_before, int epochs_after, bool resume) {
    comm::run_local(4, [&](comm::Communicator& world) {
      const int w = world.rank();
      auto model_group = world.split(w / 2, w);
      auto data_group = world.split(w % 2, w);
      Model m;
      layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                    .sampler = layers::Sampler::exact, .seed = 3,
                                    .placement = Placement::sliced(*model_group)});
      train::Trainer t(m, {.parallel = {.model = model_group.get(), .data = data_group.get()}, .dp = dct});
      if (resume) {
        const train::CheckpointInfo info = train::load_checkpoint(dir, m, t);
        REQUIRE(info.dct_residuals_restored);
      }
      for (int e = epochs_before; e < epochs_before + epochs_after; ++e) {
        const train::FitResult fit = t.fit_epoch(problem().train, {.batch = kBatch, .seed = 10u + e, .progress = false});
        if (w == 0) {
          std::lock_guard<std::mutex> lock(mu);
          resumed.losses.push_back(fit.loss);
        }
      }
      if (!resume) train::save_checkpoint(dir, m, t);
    });
  };
  session(0, 1, false);
  session(1, 1, true);
  std::filesystem::remove_all(dir);
  REQUIRE(resumed.losses == whole.losses);
}

TEST_CASE("DCT-DP: a truncated residual file fails to load, naming the file") {
  host_backend().set_num_threads(1);
  const std::string dir = (std::filesystem::temp_directory_path() / "frugal-test-dct-truncated").string();
  std::filesystem::remove_all(dir);
  const comm::DpCompression dct{.keep = 0.05f, .reestimate_every = 3};
  std::mutex mu;
  std::vector<std::string> errors;
  for (const bool resume : {false, true}) {
    comm::run_local(2, [&](comm::Communicator& c) {
      Model m;
      layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                    .sampler = layers::Sampler::exact, .seed = 3});
      train::Trainer t(m, {.parallel = {.data = &c}, .dp = dct});
      if (!resume) {
        t.fit_epoch(problem().train, {.batch = kBatch, .progress = false, .max_steps = 4});
        train::save_checkpoint(dir, m, t);
        return;
      }
      try {
        train::load_checkpoint(dir, m, t);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(e.what());
      }
    });
    if (!resume) {
      const auto info = train::read_checkpoint_manifest(dir);
      const auto file = std::filesystem::path(dir) / info.folder / "dct-replica1-slice0.ckpt";
      std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
    }
  }
  std::filesystem::remove_all(dir);
  REQUIRE(errors.size() == 1);
  REQUIRE_THAT(errors[0], Catch::Contains("dct-replica1-slice0.ckpt") && Catch::Contains("truncated"));
}

TEST_CASE("DCT-DP: Dense layers (every row, every step) train under thresholds; keep 1 stays exact") {
  // Regression: a Dense layer set its gradient's row list once, so after an exchange left only the
  // rows some replica sent, the next step's gradient no longer matched its row list.
  host_backend().set_num_threads(1);
  auto run = [](std::optional<comm::DpCompression> dp) {
    std::vector<double> losses;
    comm::run_local(2, [&](comm::Communicator& c) {
      Model m;
      layers::build_mlp_network(m, {.features = kFeatures, .labels = kLabels, .hidden = {16, 12},
                                    .sampler = layers::Sampler::exact, .seed = 4});
      train::Trainer t(m, {.parallel = {.data = &c}, .dp = dp});
      const train::FitResult fit = t.fit_epoch(problem().train, {.batch = kBatch, .progress = false, .max_steps = 12});
      if (c.rank() == 0) losses.push_back(fit.loss);
    });
    return losses;
  };
  const auto thresholded = run(comm::DpCompression{.keep = 0.05f, .reestimate_every = 3});
  REQUIRE(std::isfinite(thresholded.at(0)));
  REQUIRE(run(comm::DpCompression{.keep = 1.0f}) == run(std::nullopt));
}

TEST_CASE("DCT-DP: per-parameter keep fractions override --dp-keep by name prefix") {
  host_backend().set_num_threads(1);
  // Every parameter overridden to 1: exactly the uncompressed sum, whatever --dp-keep says.
  const Run plain = run_training(2, 1, std::nullopt);
  const Run all_kept = run_training(2, 1, comm::DpCompression{.keep = 0.01f, .per_parameter = {{"sparse_dense.", 1.0f},
                                                                                       {"softmax.", 1.0f}}});
  require_identical(all_kept, plain);
  // Only the output layer kept whole: fewer bytes than keeping everything, more than thresholding all.
  const comm::DpCompression all{.keep = 0.01f};
  comm::DpCompression output_whole = all;
  output_whole.per_parameter = {{"softmax.", 1.0f}};
  const Run thresholded = run_training(2, 1, all), partial = run_training(2, 1, output_whole);
  INFO("dp bytes: all kept " << all_kept.fit.dp_bytes_sent << ", output whole " << partial.fit.dp_bytes_sent
                             << ", all thresholded " << thresholded.fit.dp_bytes_sent);
  REQUIRE(partial.fit.dp_bytes_sent < all_kept.fit.dp_bytes_sent);
  REQUIRE(partial.fit.dp_bytes_sent > thresholded.fit.dp_bytes_sent);
  REQUIRE(output_whole.keep_for("softmax.weight") == 1.0f);
  REQUIRE(output_whole.keep_for("sparse_dense.weight") == 0.01f);
  // The first matching prefix wins.
  const comm::DpCompression ordered{.keep = 0.5f, .per_parameter = {{"softmax.w", 0.2f}, {"softmax.", 0.3f}}};
  REQUIRE(ordered.keep_for("softmax.weight") == 0.2f);
  REQUIRE(ordered.keep_for("softmax.bias") == 0.3f);
  // A prefix that matches no parameter is refused, naming the parameters; so is a bad fraction.
  comm::DpCompression typo = all;
  typo.per_parameter = {{"sofmax.", 0.5f}};
  REQUIRE_THROWS_WITH(run_training(2, 1, typo), Catch::Contains("no parameter's name starts with 'sofmax.'") &&
                                             Catch::Contains("softmax.weight"));
  REQUIRE_THROWS_WITH((comm::DpCompression{.per_parameter = {{"softmax.", 0.0f}}}.validate()),
                      Catch::Contains("expected a fraction in (0, 1]"));
}

TEST_CASE("DCT-DP momentum correction (DGC): at keep 1 it is the optimizer without momentum; thresholded, it learns") {
  host_backend().set_num_threads(1);
  // Everything is sent every step, so every velocity restarts from 0 (momentum factor masking):
  // SGD with momentum 0.9 under momentum correction steps exactly as SGD without momentum.
  const comm::DpCompression all{.keep = 1.0f, .momentum_correction = true};
  const Run corrected = run_training(2, 1, all, 2, {.optimizer = optim::Sgd{.lr = 0.5f, .momentum = 0.9f}});
  const Run plain = run_training(2, 1, std::nullopt, 2, {.optimizer = optim::Sgd{.lr = 0.5f, .momentum = 0.0f}});
  require_identical(corrected, plain);
  const Run with_momentum = run_training(2, 1, std::nullopt, 2, {.optimizer = optim::Sgd{.lr = 0.5f, .momentum = 0.9f}});
  REQUIRE(with_momentum.losses != plain.losses);
  // Thresholded (Adam: beta1 moves into the thresholders): deterministic, learns, still compresses,
  // and differs from the uncorrected run.
  const comm::DpCompression dct{.keep = 0.05f, .momentum_correction = true};
  const Run a = run_training(2, 2, dct), b = run_training(2, 2, dct);
  require_identical(a, b);
  REQUIRE(a.losses.back() < a.losses.front());
  REQUIRE(a.fit.dp_compression() > 5.0);
  REQUIRE(run_training(2, 2, comm::DpCompression{.keep = 0.05f}).losses != a.losses);
  // Refused where there is no momentum to move, or updates are exchanged.
  Model m;
  layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden, .seed = 3});
  REQUIRE_THROWS_WITH(train::Trainer(m, {.optimizer = optim::Adagrad{}, .dp = dct}), Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH(train::Trainer(m, {.dp = comm::DpCompression{.keep = 0.05f, .target = comm::DpTarget::updates,
                                                            .momentum_correction = true}}),
                      Catch::Contains("gradients"));
}

TEST_CASE("DCT-DP local clipping (DGC): each replica clips to clip_norm / sqrt(replicas) before thresholding") {
  host_backend().set_num_threads(1);
  const comm::DpCompression local{.keep = 0.05f, .local_clipping = true};
  // A limit no gradient reaches: nothing is clipped, so the run is the unclipped one, bit for bit.
  const Run loose = run_training(2, 1, local, 1, {.clip_norm = 1e6f});
  require_identical(loose, run_training(2, 1, comm::DpCompression{.keep = 0.05f}, 1));
  REQUIRE(loose.fit.clipped_steps == 0);
  // A tight one clips every step, at the local limit: the replicas' gradients before the sum, which
  // is not what clipping the sum does.
  const Run tight = run_training(2, 1, local, 1, {.clip_norm = 1e-4f});
  REQUIRE(tight.fit.clipped_steps == tight.fit.steps);
  const Run global = run_training(2, 1, comm::DpCompression{.keep = 0.05f}, 1, {.clip_norm = 1e-4f});
  REQUIRE(global.fit.clipped_steps == global.fit.steps);
  REQUIRE(tight.losses != global.losses);
  Model m;
  layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden, .seed = 3});
  REQUIRE_THROWS_WITH(train::Trainer(m, {.dp = local}), Catch::Contains("clip_norm"));
}
