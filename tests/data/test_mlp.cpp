// The dense path: IDX-style images through SparseDense -> Dense -> exact softmax with the usual
// Trainer reach high accuracy (P@1) on a small image problem; a one-layer MLP is the XMC network.
#include <catch2/catch.hpp>

#include "core/data/idx_file.h"
#include "core/rng.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/mlp_network.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

// 8x8 images of 4 classes: class c lights rows 2c and 2c+1 (with varying brightness) over
// uniform noise on a third of the pixels, so no single pixel decides the class.
data::Dataset bars(size_t n, uint64_t seed) {
  data::IdxImages img{.count = n, .rows = 8, .cols = 8, .pixels = std::vector<uint8_t>(n * 64)};
  std::vector<uint8_t> labels(n);
  Rng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<uint8_t>(rng.below(4));
    labels[i] = c;
    uint8_t* px = img.pixels.data() + i * 64;
    for (size_t j = 0; j < 64; ++j)
      if (rng.below(3) == 0) px[j] = static_cast<uint8_t>(rng.below(200));
    for (size_t r = 2u * c; r < 2u * c + 2u; ++r)
      for (size_t col = 0; col < 8; ++col)
        if (rng.below(4) != 0) px[r * 8 + col] = static_cast<uint8_t>(120 + rng.below(136));
  }
  return data::IdxFile::to_dataset(img, labels, "bars");
}

}  // namespace

TEST_CASE("mlp: two hidden layers learn an image problem to >= 95% accuracy") {
  host_backend().set_num_threads(2);
  const auto train = bars(4000, 1), test = bars(1000, 2);
  Model model;
  layers::build_mlp_network(model, {.features = 64, .labels = 4, .hidden = {32, 16}, .seed = 3});
  REQUIRE(model.layers().size() == 3);
  CHECK(model.layers()[1]->kind() == "Dense");
  train::Trainer trainer(model, {.optimizer = {.lr = 3e-3f}});
  const double before = trainer.evaluate(test, {.k = {1}}).p(1);
  for (uint64_t epoch = 1; epoch <= 4; ++epoch) trainer.fit_epoch(train, {.batch = 64, .seed = epoch, .progress = false});
  const double after = trainer.evaluate(test, {.k = {1}}).p(1);
  INFO("accuracy before " << before << ", after " << after);
  CHECK(before < 0.5);
  CHECK(after >= 0.95);
}

TEST_CASE("mlp: with one hidden layer it is the XMC network, weight for weight") {
  Model mlp, xmc;
  layers::build_mlp_network(mlp, {.features = 50, .labels = 20, .hidden = {8}, .seed = 5});
  layers::build_xmc_network(xmc, {.features = 50, .labels = 20, .hidden = 8, .sampler = layers::Sampler::exact, .seed = 5});
  const auto a = mlp.parameters(), b = xmc.parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i]->value.size() == b[i]->value.size());
    for (size_t j = 0; j < a[i]->value.size(); ++j) REQUIRE(a[i]->value.data()[j] == b[i]->value.data()[j]);
  }
}
