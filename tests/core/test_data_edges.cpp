// Data sets at the edges: one label (L = 1) trains and evaluates (P@1 is then trivially 1), and a
// data set of no points (N = 0) reads, trains zero steps and evaluates to 0 without NaN.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "core/backend.h"
#include "core/data/xmc_file.h"
#include "core/metrics.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

layers::XmcNetworkOptions net(uint32_t labels) {
  return {.features = 8, .labels = labels, .hidden = 4, .sampler = layers::Sampler::exact, .seed = 9};
}

}  // namespace

TEST_CASE("data edges: L = 1 trains and evaluates; P@1 is 1, P@5 is 1/5") {
  host_backend().set_num_threads(1);
  std::istringstream in("4 8 1\n0 1:1 2:0.5\n0 3:1\n0 0:2 7:1\n0 5:1\n");
  const data::Dataset d = data::XmcFile::read(in, "one_label.txt");
  REQUIRE(d.num_labels == 1);
  Model model;
  layers::build_xmc_network(model, net(1));
  train::Trainer trainer(model, {});
  const train::FitResult fit = trainer.fit_epoch(d, {.batch = 2, .seed = 1, .progress = false});
  CHECK(fit.steps == 2);
  CHECK(std::isfinite(fit.loss));
  const train::EvalResult r = trainer.evaluate(d, {});
  CHECK(r.p(1) == Approx(1.0));
  CHECK(r.p(5) == Approx(0.2));

  // P@k directly, with rows of one prediction (what a model with one label ranks).
  PrecisionAtK p({1, 3, 5});
  p.add(d.points, std::vector<uint32_t>(d.size(), 0));
  CHECK(p.value(1) == Approx(1.0));
  CHECK(p.value(5) == Approx(0.2));
}

TEST_CASE("data edges: N = 0 reads, trains zero steps and evaluates to 0, no NaN") {
  host_backend().set_num_threads(1);
  std::istringstream in("0 8 3\n");
  const data::Dataset d = data::XmcFile::read(in, "empty.txt");
  REQUIRE(d.size() == 0);
  Model model;
  layers::build_xmc_network(model, net(3));
  train::Trainer trainer(model, {});
  const train::FitResult fit = trainer.fit_epoch(d, {.batch = 2, .seed = 1, .progress = false});
  CHECK(fit.steps == 0);
  CHECK(fit.loss == 0.0);
  const train::EvalResult r = trainer.evaluate(d, {});
  CHECK(r.samples == 0);
  CHECK(r.p(1) == 0.0);
}
