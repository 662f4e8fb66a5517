// --slice-weights auto through the library API (train/rebalance.h), 2 ranks as threads:
// gathered step times give every rank the same weights; reslicing in place keeps every parameter
// (the slices follow the new weights, the totals stay), training continues without NaN, and the
// whole sequence is deterministic.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/data/batch_loader.h"
#include "core/device.h"
#include "core/data/synth_xmc.h"
#include "train/rebalance.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

constexpr size_t kFeatures = 600, kLabels = 200, kHidden = 20, kBatch = 32;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = 20 * kBatch, .test = 100, .nnz = 15,
       .labels_per_point = 2, .seed = 6});
  return d;
}

void build(Model& m, comm::Communicator& c, const std::vector<double>& weights) {
  layers::build_xmc_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                .sampler = layers::Sampler::lsh,
                                .lsh = {.family = lsh::Dwta{.k = 2}, .tables = 8}, .seed = 5,
                                .placement = Placement::sliced(c, weights)});
}

struct Outcome {
  std::vector<double> losses;          // rank 0's, before and after the reslice
  std::vector<double> weights;         // as rank 0 computed them
  std::vector<double> weights_rank1;   // as rank 1 did
  size_t local_before[2] = {0, 0}, local_after[2] = {0, 0};  // parameters held per rank
  size_t hidden_after[2] = {0, 0}, labels_after[2] = {0, 0};
  bool trained_after[2] = {false, false};  // still has a trainer after the reslice
  int group_after[2] = {0, 0};             // its model group's size after the reslice
};

// regroup: ranks left out leave the model group (reslice's Regroup, what `frugal train` does)
// instead of staying in it with an empty slice.
Outcome run(const std::string& dir, double rank1_seconds = 0.03, bool regroup = false) {
  Outcome out;
  std::mutex mu;
  comm::run_local(2, [&](comm::Communicator& c) {
    Model model;
    build(model, c, {});
    std::optional<train::Trainer> trainer;
    trainer.emplace(model, train::TrainerOptions{.parallel = {.model = &c}});
    data::BatchLoader loader(problem().train, {.batch = kBatch, .seed = 2});
    SparseBatch batch;
    std::vector<double> losses;
    for (int i = 0; i < 6 && loader.next(batch); ++i) losses.push_back(trainer->train_step(batch));
    const size_t before = model.num_parameters();
    // Rank 1 "measured" rank1_seconds against rank 0's 0.01 s (fixed, so the run is deterministic).
    const std::vector<double> times = train::gather_step_seconds(c.rank() == 0 ? 0.01 : rank1_seconds, &c, nullptr);
    const train::RebalancePlan plan = train::throughput_weights(times, model.input().placement().weights);
    comm::Communicator* group = &c;
    std::unique_ptr<comm::Communicator> kept;
    const auto rebuild = [&](Model& m, const std::vector<double>& w) { build(m, *group, w); };
    if (regroup && plan.left_out[1]) {
      const bool leave = plan.left_out[static_cast<size_t>(c.rank())];
      kept = c.split(leave ? 1 : 0, c.rank());
      group = kept.get();
      const train::Regroup g{.leave = leave, .model = group};
      train::reslice(dir, model, trainer, rebuild, {plan.weights[0]}, &g);
    } else {
      train::reslice(dir, model, trainer, rebuild, plan.weights);
    }
    c.barrier().wait();
    while (trainer && loader.next(batch)) losses.push_back(trainer->train_step(batch));
    out.trained_after[c.rank()] = trainer.has_value();
    out.group_after[c.rank()] = group->size();
    std::lock_guard<std::mutex> lock(mu);
    const size_t r = static_cast<size_t>(c.rank());
    out.local_before[r] = before;
    out.local_after[r] = model.num_parameters();
    if (trainer) {  // a rank that left has no model
      const auto hidden = model.input().placement().own_slice(kHidden);
      out.hidden_after[r] = hidden.second - hidden.first;
      out.labels_after[r] = model.output().placement().own_slice(kLabels).second -
                            model.output().placement().own_slice(kLabels).first;
    }
    if (r == 0) {
      out.losses = losses;
      out.weights = plan.weights;
    } else {
      out.weights_rank1 = plan.weights;
    }
  });
  return out;
}

}  // namespace

TEST_CASE("slice weights auto: 2 ranks reslice onto measured weights in place; training continues, "
          "deterministically", "[rebalance][distributed]") {
  const std::string dir = "rebalance_test_scratch";
  std::filesystem::remove_all(dir);
  const Outcome a = run(dir);
  std::filesystem::remove_all(dir);
  // Times {0.01, 0.03} over equal slices: shares 3/4 and 1/4, the same on both ranks.
  REQUIRE(a.weights.size() == 2);
  CHECK(a.weights[0] == Approx(0.75));
  CHECK(a.weights[1] == Approx(0.25));
  CHECK(a.weights == a.weights_rank1);
  CHECK(a.labels_after[0] == 150);
  CHECK(a.labels_after[1] == 50);
  CHECK(a.hidden_after[0] == 15);
  CHECK(a.hidden_after[1] == 5);
  // Every parameter is still there: the slices moved, the totals did not.
  CHECK(a.local_before[0] + a.local_before[1] == a.local_after[0] + a.local_after[1]);
  CHECK(a.local_after[0] > a.local_after[1]);
  REQUIRE(a.losses.size() == 20);
  for (const double l : a.losses) CHECK(std::isfinite(l));
  // The loss continues where it was (the last steps' mean is below the first steps').
  const double first = (a.losses[0] + a.losses[1] + a.losses[2]) / 3, last = (a.losses[17] + a.losses[18] + a.losses[19]) / 3;
  CHECK(last < first);
  const Outcome b = run(dir);
  std::filesystem::remove_all(dir);
  CHECK(a.losses == b.losses);
  CHECK(a.weights == b.weights);
}

TEST_CASE("slice weights auto: a rank 100x slower is left out; the other holds the whole model and trains on",
          "[rebalance][distributed]") {
  const std::string dir = "rebalance_test_scratch_left_out";
  std::filesystem::remove_all(dir);
  const Outcome a = run(dir, 1.0);
  std::filesystem::remove_all(dir);
  REQUIRE(a.weights == std::vector<double>{1.0, 0.0});
  CHECK(a.weights == a.weights_rank1);
  CHECK(a.labels_after[0] == kLabels);
  CHECK(a.labels_after[1] == 0);
  CHECK(a.hidden_after[0] == kHidden);
  CHECK(a.hidden_after[1] == 0);
  CHECK(a.local_after[1] == 0);
  CHECK(a.local_after[0] == a.local_before[0] + a.local_before[1]);
  REQUIRE(a.losses.size() == 20);
  for (const double l : a.losses) CHECK(std::isfinite(l));
  const double first = (a.losses[0] + a.losses[1] + a.losses[2]) / 3, last = (a.losses[17] + a.losses[18] + a.losses[19]) / 3;
  CHECK(last < first);
  const Outcome b = run(dir, 1.0);
  std::filesystem::remove_all(dir);
  CHECK(a.losses == b.losses);
}

TEST_CASE("slice weights auto: a rank left out leaves the model group; the one kept trains as with an empty slice",
          "[rebalance][distributed]") {
  const std::string dir = "rebalance_test_scratch_regroup";
  std::filesystem::remove_all(dir);
  const Outcome in_group = run(dir, 1.0, false);
  std::filesystem::remove_all(dir);
  const Outcome left = run(dir, 1.0, true);
  std::filesystem::remove_all(dir);
  CHECK(left.trained_after[0]);
  CHECK_FALSE(left.trained_after[1]);
  CHECK(left.group_after[0] == 1);
  CHECK(left.group_after[1] == 1);
  CHECK(left.local_after[1] == 0);
  CHECK(left.labels_after[0] == kLabels);
  CHECK(left.hidden_after[0] == kHidden);
  // Alone, rank 0 computes what it computed next to an empty slice: the same losses, bit for bit.
  REQUIRE(left.losses.size() == 20);
  CHECK(left.losses == in_group.losses);
}

TEST_CASE("a model group mixing GPU and CPU ranks is told apart from one of a single kind (every rank alike)",
          "[rebalance][distributed]") {
  for (const bool mixed : {true, false}) {
    std::mutex mu;
    std::vector<int> answers;
    comm::run_local(3, [&](comm::Communicator& c) {
      const bool answer = group_mixes_devices(&c, mixed && c.rank() == 0 ? "cuda" : "cpu");
      std::lock_guard<std::mutex> lock(mu);
      answers.push_back(answer ? 1 : 0);
    });
    CHECK(answers == std::vector<int>(3, mixed ? 1 : 0));
  }
  CHECK_FALSE(group_mixes_devices(nullptr, "cuda"));
}
