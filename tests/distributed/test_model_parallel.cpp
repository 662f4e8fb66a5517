// Model-parallel and hybrid training must compute what one process computes: with the exact
// sampler, N ranks with uneven slices give the losses and weights of 1 rank (relative 1e-5 after
// 20 steps), and the grids 1x4, 2x2 and 4x1 agree. Ranks are threads (LocalCommunicator).
#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/data/batch_loader.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/softmax_output.h"
#include "layers/sparse_dense.h"
#include "layers/xmc_network.h"
#include "tests/distributed/whole_weights.h"

using namespace frugal;

namespace {

constexpr size_t kFeatures = 800, kLabels = 300, kHidden = 24, kSteps = 20, kBatch = 32;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = kSteps * kBatch, .test = 200, .nnz = 20,
       .labels_per_point = 3, .seed = 8});
  return d;
}

void build(Model& m, layers::Sampler sampler, Placement placement, Dtype storage = Dtype::f32) {
  const Rng seeds(5);
  m.add<layers::SparseDense>({.in = kFeatures, .out = kHidden, .act = Act::relu, .seed = seeds.split(1).next_u64(),
                              .placement = placement, .storage = storage});
  m.add<layers::SoftmaxOutput>({.in = kHidden, .out = kLabels, .sampler = sampler,
                                .lsh = {.family = lsh::Dwta{.k = 2}, .tables = 8}, .seed = seeds.split(2).next_u64(),
                                .placement = placement, .storage = storage});
}

struct Run {
  std::vector<double> losses;
  Tensor w1, w2;  // full (gathered) weights: F x H and L x H
  double p1 = 0;
  uint64_t overlapped_steps = 0;  // rank 0's
  uint64_t split_gathers = 0;     // rank 0's
};

// Copies a rank's slices into the full matrices.
void store_slices(Model& m, Run& run, std::mutex& mu) {
  std::lock_guard<std::mutex> lock(mu);
  std::map<std::string, Tensor> whole{{"sparse_dense.weight", std::move(run.w1)}, {"softmax.weight", std::move(run.w2)}};
  testing::add_slices(m, whole);
  run.w1 = std::move(whole["sparse_dense.weight"]);
  run.w2 = std::move(whole["softmax.weight"]);
}

Run run_model_parallel(int ranks, std::vector<double> weights, layers::Sampler sampler,
                       Dtype storage = Dtype::f32, bool overlap = true,
                       train::ForwardSplit split = train::ForwardSplit::automatic) {
  Run run;
  std::mutex mu;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    Model m;
    build(m, sampler, Placement::sliced(c, weights), storage);
    train::TrainerOptions o{.parallel = {.model = &c}};
    o.overlap = overlap;
    o.forward_split = split;
    train::Trainer t(m, o);
    data::BatchLoader loader(problem().train, {.batch = kBatch, .seed = 2});
    SparseBatch batch;
    std::vector<double> losses;
    while (loader.next(batch)) losses.push_back(t.train_step(batch));
    const double p1 = t.evaluate(problem().test, {}).p(1);
    store_slices(m, run, mu);
    if (c.rank() == 0) {
      run.losses = losses;
      run.p1 = p1;
      run.overlapped_steps = t.overlapped_steps();
      run.split_gathers = t.split_gathers();
    }
  });
  return run;
}

void require_close(const Tensor& a, const Tensor& b, double rel) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  INFO("relative weight difference " << testing::relative_difference(a, b));
  REQUIRE(testing::relative_difference(a, b) <= rel);
}

void require_same_losses(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i);
    REQUIRE(a[i] == Approx(b[i]).epsilon(1e-5));
  }
}

}  // namespace

TEST_CASE("model parallel: 2, 3, 4 ranks with uneven slices equal 1 rank (exact sampler)") {
  host_backend().set_num_threads(1);
  const Run reference = run_model_parallel(1, {}, layers::Sampler::exact);
  REQUIRE(reference.losses.size() == kSteps);
  // Weights of 0: ranks left out (empty slices) take part in the exchanges with nothing of their own.
  for (const auto& weights : std::vector<std::vector<double>>{{1, 2}, {3, 1, 2}, {1, 1, 2, 3}, {1, 0}, {0, 1, 2},
                                                              {2, 0, 1, 0}}) {
    INFO(weights.size() << " ranks, weights " << weights[0] << "," << weights[1]);
    const Run mp = run_model_parallel(static_cast<int>(weights.size()), weights, layers::Sampler::exact);
    require_same_losses(mp.losses, reference.losses);
    require_close(mp.w1, reference.w1, 1e-5);
    require_close(mp.w2, reference.w2, 1e-5);
    REQUIRE(mp.p1 == reference.p1);
  }
}

TEST_CASE("model parallel: a rank left out (empty slice) changes nothing with the LSH sampler either") {
  // Rank 0 holds every neuron, so its tables and draws are 1 rank's; rank 1 holds none, has no
  // tables, and sends only its empty share of the normalizer.
  host_backend().set_num_threads(1);
  const Run reference = run_model_parallel(1, {}, layers::Sampler::lsh);
  const Run mp = run_model_parallel(2, {1, 0}, layers::Sampler::lsh);
  REQUIRE(reference.losses.size() == kSteps);
  require_same_losses(mp.losses, reference.losses);
  require_close(mp.w1, reference.w1, 1e-5);
  require_close(mp.w2, reference.w2, 1e-5);
  REQUIRE(mp.p1 == reference.p1);
}

TEST_CASE("model parallel: bf16 storage on 2 and 3 ranks follows 1 rank (exact sampler)") {
  // The stochastic rounding of bf16 updates is keyed by each element's place in the whole
  // parameter, so slices round as the whole matrix does; only sums taken in another order (the
  // normalizer's) can flip a rounding, a bf16 step (2^-8 relative) in a few elements.
  host_backend().set_num_threads(1);
  const Run reference = run_model_parallel(1, {}, layers::Sampler::exact, Dtype::bf16);
  const Run f32 = run_model_parallel(1, {}, layers::Sampler::exact);
  REQUIRE(reference.losses.size() == kSteps);
  for (const auto& weights : std::vector<std::vector<double>>{{1, 2}, {3, 1, 2}}) {
    INFO(weights.size() << " ranks");
    const Run mp = run_model_parallel(static_cast<int>(weights.size()), weights, layers::Sampler::exact, Dtype::bf16);
    for (size_t i = 0; i < kSteps; ++i) REQUIRE(mp.losses[i] == Approx(reference.losses[i]).epsilon(1e-4));
    require_close(mp.w1, reference.w1, 1e-3);
    require_close(mp.w2, reference.w2, 1e-5);  // the exact softmax keeps f32
  }
  // And bf16 follows f32 to within its rounding.
  require_close(reference.w1, f32.w1, 2e-2);
  REQUIRE(reference.losses.back() == Approx(f32.losses.back()).epsilon(1e-2));
}

TEST_CASE("model parallel: the optimizer overlapping the input boundary's exchange changes no bit") {
  // TrainerOptions::overlap moves the output layer while dLoss/dh is reduce-scattered, and gathers
  // the input layer's output in two row parts while computing the second; each parameter's update
  // is the same, so the runs must agree exactly.
  host_backend().set_num_threads(1);
  for (const auto sampler : {layers::Sampler::exact, layers::Sampler::lsh}) {
    for (const auto& weights : std::vector<std::vector<double>>{{1, 1}, {3, 1, 2}}) {
      INFO(weights.size() << " ranks, sampler " << (sampler == layers::Sampler::lsh ? "lsh" : "exact"));
      const int n = static_cast<int>(weights.size());
      const Run on = run_model_parallel(n, weights, sampler, Dtype::f32, true, train::ForwardSplit::always);
      // This input layer is far below the automatic split's threshold: only the backward overlap.
      const Run automatic = run_model_parallel(n, weights, sampler, Dtype::f32, true);
      const Run off = run_model_parallel(n, weights, sampler, Dtype::f32, false, train::ForwardSplit::always);
      REQUIRE(on.losses.size() == kSteps);
      REQUIRE(on.overlapped_steps == kSteps);
      REQUIRE(automatic.overlapped_steps == kSteps);
      REQUIRE(off.overlapped_steps == 0);
      // Every forward pass (the steps, then evaluation's batches) gathered its input in two parts.
      REQUIRE(on.split_gathers > kSteps);
      REQUIRE(automatic.split_gathers == 0);
      REQUIRE(off.split_gathers == 0);
      for (const Run* r : {&on, &automatic}) {
        REQUIRE(r->losses == off.losses);
        REQUIRE(testing::relative_difference(r->w1, off.w1) == 0.0);
        REQUIRE(testing::relative_difference(r->w2, off.w2) == 0.0);
        REQUIRE(r->p1 == off.p1);
      }
    }
  }
}

TEST_CASE("model parallel: the automatic forward split applies where half the batch's input work reaches 2^20") {
  // Slices of 500 and 500 neurons; ~107 features a point. Half of a 64-point batch on the widest
  // slice is ~32 x 107 x 500 = 1.7M multiply-adds (split); of a 32-point batch 0.86M (whole), where
  // the whole layer's 1000 neurons would give 1.7M: the rule must use the widest slice.
  host_backend().set_num_threads(1);
  static const data::SynthXmc heavy = data::generate_synth_xmc(
      {.features = 5000, .labels = 40, .train = 128, .test = 0, .nnz = 300, .labels_per_point = 1, .seed = 3});
  for (const size_t batch : {size_t{64}, size_t{32}}) {
    std::mutex mu;
    uint64_t splits = 0;
    double nnz_per_point = 0;
    comm::run_local(2, [&](comm::Communicator& c) {
      Model m;
      const Placement placement = Placement::sliced(c, {1, 1});
      m.add<layers::SparseDense>({.in = 5000, .out = 1000, .act = Act::relu, .seed = 1, .placement = placement});
      m.add<layers::SoftmaxOutput>({.in = 1000, .out = 40, .sampler = layers::Sampler::exact, .seed = 2,
                                    .placement = placement});
      train::Trainer t(m, {.parallel = {.model = &c}});
      data::BatchLoader loader(heavy.train, {.batch = batch, .seed = 2});
      SparseBatch b;
      double nnz = 0, points = 0;
      while (loader.next(b)) {
        t.train_step(b);
        nnz += static_cast<double>(b.feature_ids.size());
        points += static_cast<double>(b.size());
      }
      std::lock_guard<std::mutex> lock(mu);
      if (c.rank() == 0) {
        splits = t.split_gathers();
        nnz_per_point = nnz / points;
      }
    });
    INFO("batch " << batch << ", " << nnz_per_point << " features a point");
    const double half = static_cast<double>(batch) / 2 * nnz_per_point * 500;
    REQUIRE(std::abs(half - train::kForwardSplitMinMultiplyAdds) > 0.1 * train::kForwardSplitMinMultiplyAdds);  // far from the line
    REQUIRE(splits == (half >= train::kForwardSplitMinMultiplyAdds ? 128 / batch : 0));
    REQUIRE((batch == 64) == (splits > 0));
  }
}

TEST_CASE("model parallel: LSH runs are deterministic per seed and learn") {
  host_backend().set_num_threads(1);
  const Run a = run_model_parallel(3, {}, layers::Sampler::lsh);
  const Run b = run_model_parallel(3, {}, layers::Sampler::lsh);
  REQUIRE(a.losses == b.losses);
  REQUIRE(a.losses.back() < a.losses.front());
}

namespace {
// World of 4 ranks as a D x M grid: M ranks slice the model, D replicas split each batch.
Run run_grid(int d, int m_size, bool dense) {
  Run run;
  std::mutex mu;
  comm::run_local(d * m_size, [&](comm::Communicator& world) {
    const int w = world.rank();
    auto model_group = world.split(w / m_size, w);
    auto data_group = world.split(w % m_size, w);
    Model m;
    build(m, layers::Sampler::exact, Placement::sliced(*model_group));
    train::Trainer t(m, {.parallel = {.model = model_group.get(), .data = data_group.get(), .dense_gradients = dense}});
    const train::FitResult fit = t.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    const double p1 = t.evaluate(problem().test, {}).p(1);
    if (w / m_size == 0) store_slices(m, run, mu);  // replica 0's slices
    if (w == 0) {
      run.losses = {fit.loss};
      run.p1 = p1;
    }
  });
  return run;
}
}  // namespace

TEST_CASE("hybrid grids 1x4, 2x2, 4x1 agree with 1 rank (exact sampler); dense data parallel too") {
  host_backend().set_num_threads(1);
  const Run reference = run_grid(1, 1, false);
  for (const auto& [d, m] : std::vector<std::pair<int, int>>{{1, 4}, {2, 2}, {4, 1}}) {
    INFO("grid " << d << "x" << m);
    const Run g = run_grid(d, m, false);
    REQUIRE(g.losses[0] == Approx(reference.losses[0]).epsilon(1e-5));
    require_close(g.w1, reference.w1, 1e-5);
    require_close(g.w2, reference.w2, 1e-5);
    REQUIRE(std::abs(g.p1 - reference.p1) <= 0.01);
  }
  // The dense (Horovod) scheme sums every row every step, so untouched rows get Adam steps with a
  // zero gradient (momentum keeps moving them), as dense Adam in PyTorch does: close, not equal.
  const Run dense = run_grid(4, 1, true);
  REQUIRE(dense.losses[0] == Approx(reference.losses[0]).epsilon(1e-3));
  REQUIRE(std::abs(dense.p1 - reference.p1) <= 0.05);
}
