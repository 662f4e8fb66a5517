// Training with bf16 storage (`--precision bf16`): the row-sparse weights and their Adam moments in
// bf16, computed in f32. With the bf16 dot products off, the gradients of a bf16 model are exactly
// those of an f32 model holding the same (bf16) values, so the f32 finite-difference tests
// (tests/layers/test_gradients.cpp) cover the bf16 path's arithmetic (on, the default where the CPU
// has AVX512-BF16, each product is within a bound of it: tests/kernels/test_bf16_dot.cpp); runs
// are bit-reproducible per seed, learn as f32 does, and checkpoints (always f32 on disk) move
// between precisions.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "core/backend.h"
#include "core/data/batch_loader.h"
#include "core/data/synth_xmc.h"
#include "train/checkpoint_manifest.h"
#include "core/rng.h"
#include "kernels/bf16_dot.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 5000, .labels = 1000, .train = 10000, .test = 1000, .nnz = 40, .labels_per_point = 3, .seed = 4});
  return d;
}

layers::XmcNetworkOptions net(layers::Sampler sampler, Dtype precision) {
  return {.features = 5000, .labels = 1000, .hidden = 64, .sampler = sampler,
          .lsh = {.family = lsh::auto_family(lsh::Dwta{}, 50, 1000), .tables = 50, .min_active = 300,
                  .max_active = 300},
          .seed = 9, .precision = precision};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (size_t r = 0; r < a.rows(); ++r)
    for (size_t c = 0; c < a.cols(); ++c) {
      const float x = a.value_at(r, c), y = b.value_at(r, c);
      if (std::memcmp(&x, &y, sizeof x) != 0) return false;
    }
  return true;
}

std::vector<double> losses(Dtype precision, size_t steps) {
  Model model;
  layers::build_xmc_network(model, net(layers::Sampler::lsh, precision));
  train::Trainer trainer(model, {});
  data::BatchLoader loader(problem().train, {.batch = 64, .seed = 3});
  std::vector<double> out;
  SparseBatch batch;
  while (out.size() < steps && loader.next(batch)) out.push_back(trainer.train_step(batch));
  return out;
}

}  // namespace

TEST_CASE("bf16: a bf16 model's loss and gradients are an f32 model's on the same values, bit for bit") {
  struct Restore {
    kernels::Bf16Dot mode = kernels::bf16_dot();
    ~Restore() { kernels::set_bf16_dot(mode); }
  } restore;
  kernels::set_bf16_dot(kernels::Bf16Dot::off);  // the widened kernels: the f32 model's bits
  host_backend().set_num_threads(2);
  for (const auto sampler : {layers::Sampler::lsh, layers::Sampler::exact}) {
    INFO("sampler " << (sampler == layers::Sampler::lsh ? "lsh" : "exact"));
    Model half, full;
    layers::build_xmc_network(half, net(sampler, Dtype::bf16));
    layers::build_xmc_network(full, net(sampler, Dtype::f32));
    const auto ph = half.parameters(), pf = full.parameters();
    REQUIRE(ph[0]->value.dtype() == Dtype::bf16);  // the sparse input layer's weight
    REQUIRE(ph[2]->value.dtype() == (sampler == layers::Sampler::lsh ? Dtype::bf16 : Dtype::f32));
    for (size_t i = 0; i < pf.size(); ++i) pf[i]->value.assign(converted(ph[i]->value, Dtype::f32));
    // One step each (the gradients stay after the step); the weights then differ only by rounding.
    train::Trainer th(half, {}), tf(full, {});
    data::BatchLoader lh(problem().train, {.batch = 64, .seed = 3}), lf(problem().train, {.batch = 64, .seed = 3});
    SparseBatch bh, bf;
    REQUIRE((lh.next(bh) && lf.next(bf)));
    REQUIRE(th.train_step(bh) == tf.train_step(bf));
    for (size_t i = 0; i < pf.size(); ++i) {
      INFO(pf[i]->name);
      REQUIRE(ph[i]->grad.rows == pf[i]->grad.rows);
      REQUIRE(same_bits(ph[i]->grad.values, pf[i]->grad.values));
    }
  }
}

TEST_CASE("bf16: training learns like f32, reproducibly, in about half the state") {
  host_backend().set_num_threads(2);
  REQUIRE(losses(Dtype::bf16, 30) == losses(Dtype::bf16, 30));
  double p1[2] = {};
  size_t state[2] = {};
  for (const Dtype precision : {Dtype::f32, Dtype::bf16}) {
    const size_t slot = precision == Dtype::bf16 ? 1 : 0;
    Model model;
    layers::build_xmc_network(model, net(layers::Sampler::lsh, precision));
    train::Trainer trainer(model, {.optimizer = {.lr = 2e-3f}});
    for (int epoch = 1; epoch <= 3; ++epoch)
      trainer.fit_epoch(problem().train, {.batch = 64, .seed = uint64_t(epoch), .progress = false});
    p1[slot] = trainer.evaluate(problem().test, {}).p(1);
    for (const Parameter* p : model.parameters()) state[slot] += p->value.bytes();
    state[slot] += trainer.optimizer().state_bytes();
  }
  INFO("P@1 f32 " << p1[0] << ", bf16 " << p1[1]);
  // The problem trains to P@1 ~0.9 (0.897 .. 0.900 as the sampler's random streams change): this
  // says bf16 learns; the next line, that it learns like f32.
  REQUIRE(p1[1] >= 0.88);
  REQUIRE(std::abs(p1[1] - p1[0]) <= 0.02);
  INFO("state bytes f32 " << state[0] << ", bf16 " << state[1]);
  REQUIRE(static_cast<double>(state[1]) <= 0.55 * static_cast<double>(state[0]));
}

TEST_CASE("bf16: checkpoints hold f32 and resume in either precision; bf16 resumes bit-identically") {
  namespace fs = std::filesystem;
  const std::string dir = "bf16_checkpoint_test";
  fs::remove_all(dir);
  const auto& d = problem();
  Model straight;
  layers::build_xmc_network(straight, net(layers::Sampler::lsh, Dtype::bf16));
  train::Trainer t1(straight, {});
  t1.fit_epoch(d.train, {.batch = 64, .seed = 1, .progress = false});
  train::save_checkpoint(dir, straight, t1, {{"hidden", 64}});
  const double loss2 = t1.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false}).loss;

  // bf16 -> bf16: the same weights, moments and the same second epoch.
  Model resumed;
  layers::build_xmc_network(resumed, net(layers::Sampler::lsh, Dtype::bf16));
  train::Trainer t2(resumed, {});
  train::load_checkpoint(dir, resumed, t2, {{"hidden", 64}});
  REQUIRE(resumed.parameters()[0]->value.dtype() == Dtype::bf16);
  REQUIRE(t2.optimizer().state(0).m.dtype() == Dtype::bf16);
  REQUIRE(t2.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false}).loss == loss2);
  const auto pa = straight.parameters(), pb = resumed.parameters();
  for (size_t i = 0; i < pa.size(); ++i) REQUIRE(same_bits(pa[i]->value, pb[i]->value));

  // bf16 -> f32: the widened values; and f32 -> bf16: rounded to nearest.
  Model wide;
  layers::build_xmc_network(wide, net(layers::Sampler::lsh, Dtype::f32));
  train::Trainer t3(wide, {});
  train::load_checkpoint(dir, wide, t3, {{"hidden", 64}});
  REQUIRE(wide.parameters()[0]->value.dtype() == Dtype::f32);
  Model check;
  layers::build_xmc_network(check, net(layers::Sampler::lsh, Dtype::bf16));
  train::Trainer t4(check, {});
  train::load_checkpoint(dir, check, t4, {{"hidden", 64}});
  for (size_t i = 0; i < pa.size(); ++i) REQUIRE(same_bits(wide.parameters()[i]->value, check.parameters()[i]->value));
  t3.fit_epoch(d.train, {.batch = 64, .seed = 2, .progress = false});
  train::save_checkpoint(dir, wide, t3, {{"hidden", 64}});
  Model narrow;
  layers::build_xmc_network(narrow, net(layers::Sampler::lsh, Dtype::bf16));
  train::Trainer t5(narrow, {});
  train::load_checkpoint(dir, narrow, t5, {{"hidden", 64}});
  const Tensor& w = wide.parameters()[0]->value;
  const Tensor& n = narrow.parameters()[0]->value;
  REQUIRE(n.dtype() == Dtype::bf16);
  for (size_t r = 0; r < w.rows(); r += 97)
    for (size_t c = 0; c < w.cols(); ++c) REQUIRE(n.value_at(r, c) == bf16_to_f32(f32_to_bf16(w.at(r, c))));
  fs::remove_all(dir);
}

TEST_CASE("bf16: exact scoring over bf16 label blocks ranks as f32 scoring of the same values") {
  // 40,000 labels: three blocks of widened labels, the last one short.
  const size_t labels = 40000, in = 8, points = 16, k = 5;
  layers::SoftmaxOutput half({.in = in, .out = labels, .sampler = layers::Sampler::lsh,
                              .lsh = {.family = lsh::Dwta{.k = 2}, .tables = 2}, .seed = 3,
                              .storage = Dtype::bf16});
  layers::SoftmaxOutput full({.in = in, .out = labels, .sampler = layers::Sampler::lsh,
                              .lsh = {.family = lsh::Dwta{.k = 2}, .tables = 2}, .seed = 3});
  const auto ph = half.parameters(), pf = full.parameters();
  for (size_t i = 0; i < pf.size(); ++i) pf[i]->value.assign(converted(ph[i]->value, Dtype::f32));
  Tensor h(points, in);
  Rng rng(5);
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(rng.normal());
  std::vector<uint32_t> lh, lf;
  std::vector<float> sh, sf;
  half.top_k(h, k, lh, sh);
  full.top_k(h, k, lf, sf);
  REQUIRE(lh == lf);
  for (size_t j = 0; j < sh.size(); ++j) REQUIRE(sh[j] == Approx(sf[j]).epsilon(1e-5));
}
