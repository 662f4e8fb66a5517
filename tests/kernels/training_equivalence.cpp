#include "tests/kernels/training_equivalence.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/placement.h"
#include "train/checkpoint.h"
#include "layers/mlp_network.h"

namespace frugal::testing {

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = 12 * kBatch, .test = 300, .nnz = 25,
       .labels_per_point = 2, .seed = 21});
  return d;
}

std::vector<Setup> standard_setups() {
  return {
      {.name = "lsh, adam lazy"},
      {.name = "exact, dense hidden layer, adam catch-up", .sampler = layers::Sampler::exact, .hidden = {48, 32},
       .optimizer = optim::Adam{.lr = 2e-3f, .weight_decay = 1e-4f, .updates = optim::SparseUpdates::catchup}},
      {.name = "lsh, sgd catch-up", .optimizer = optim::Sgd{.lr = 0.1f, .updates = optim::SparseUpdates::catchup}},
      {.name = "lsh, adagrad", .optimizer = optim::Adagrad{.lr = 0.05f}},
      {.name = "lsh, rowwise adagrad", .optimizer = {.method = optim::Method::rowwise_adagrad, .lr = 0.05f}},
      {.name = "lsh, rowwise adam catch-up, bf16 storage",
       .optimizer = optim::RowwiseAdam{.lr = 3e-3f, .updates = optim::SparseUpdates::catchup}, .precision = Dtype::bf16},
      {.name = "lsh, bf16 storage", .precision = Dtype::bf16},
  };
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols() || a.dtype() != b.dtype()) return false;
  if (a.bytes() == 0) return true;
  const Tensor ha = to_host(a), hb = to_host(b);
  return std::memcmp(ha.raw(), hb.raw(), a.bytes()) == 0;
}

std::unique_ptr<Model> build(const Setup& s) {
  auto model = std::make_unique<Model>();
  layers::build_mlp_network(
      *model, {.features = kFeatures, .labels = kLabels, .hidden = s.hidden, .sampler = s.sampler,
               .lsh = {.tables = 16, .min_active = 60, .max_active = 120}, .seed = 5, .precision = s.precision});
  return model;
}

void use(Backend& be, Model& model, train::Trainer& trainer) {
  model.set_backend(&be);
  trainer.optimizer().set_backend(&be);
}

Outcome run_training(Backend& be, const Setup& s, const std::string& resume_dir) {
  Outcome out;
  auto model = build(s);
  auto trainer = std::make_unique<train::Trainer>(*model, train::TrainerOptions{.optimizer = s.optimizer});
  use(be, *model, *trainer);
  out.losses.push_back(trainer->fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false}).loss);
  if (!resume_dir.empty()) {
    train::save_checkpoint(resume_dir, *model, *trainer);
    model = build(s);
    trainer = std::make_unique<train::Trainer>(*model, train::TrainerOptions{.optimizer = s.optimizer});
    use(be, *model, *trainer);
    train::load_checkpoint(resume_dir, *model, *trainer);
  }
  out.losses.push_back(trainer->fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false}).loss);
  out.p1 = trainer->evaluate(problem().test, {.k = {1}}).p(1);
  for (Parameter* p : model->parameters()) out.weights.push_back(to_host(p->value));
  for (size_t i = 0; i < trainer->optimizer().size(); ++i) {
    out.weights.push_back(to_host(trainer->optimizer().state(i).m));
    out.weights.push_back(to_host(trainer->optimizer().state(i).v));
  }
  return out;
}

void require_same(const Outcome& a, const Outcome& b) {
  REQUIRE(a.losses == b.losses);
  CHECK(a.p1 == b.p1);
  REQUIRE(a.weights.size() == b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    INFO("tensor " << i);
    CHECK(same_bits(a.weights[i], b.weights[i]));
  }
}

Outcome train_grid(Backend& first, std::optional<comm::DpCompression> dp, int replicas) {
  Outcome out;
  std::mutex mu;
  comm::run_local(2 * replicas, [&](comm::Communicator& world) {
    const int w = world.rank();
    auto model_group = world.split(w / 2, w);
    auto data_group = world.split(w % 2, w);
    Model model;
    layers::build_mlp_network(model, {.features = kFeatures, .labels = kLabels, .hidden = {32},
                                      .sampler = layers::Sampler::lsh,
                                      .lsh = {.tables = 16, .min_active = 60, .max_active = 120}, .seed = 5,
                                      .placement = Placement::sliced(*model_group)});
    train::Trainer trainer(model, {.parallel = {.model = model_group.get(), .data = data_group.get()}, .dp = dp});
    Backend& be = w == 0 ? first : *find_backend("cpu");
    use(be, model, trainer);
    std::vector<double> losses;
    for (uint64_t e = 1; e <= 2; ++e)
      losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = e, .progress = false}).loss);
    const double p1 = trainer.evaluate(problem().test, {.k = {1}}).p(1);
    if (w != 0) return;
    std::lock_guard<std::mutex> lock(mu);
    out.losses = losses;
    out.p1 = p1;
    for (Parameter* p : model.parameters()) out.weights.push_back(to_host(p->value));
  });
  return out;
}

}  // namespace frugal::testing
