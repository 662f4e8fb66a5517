// Gradient clipping (by hand, and over a model-parallel group), input dropout (rate, scaling,
// determinism, the same draws for a replica's share), early stopping.
#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "comm/local_communicator.h"
#include "train/early_stopping.h"
#include "train/gradient_clipping.h"
#include "train/input_dropout.h"

using namespace frugal;

namespace {
Parameter with_gradient(const char* name, std::vector<float> g, int sliced_axis) {
  Parameter p{name, Tensor(g.size(), 1), {}, sliced_axis};
  for (uint32_t r = 0; r < g.size(); ++r) p.grad.rows.push_back(r);
  p.grad.values = Tensor(g.size(), 1);
  std::copy(g.begin(), g.end(), p.grad.values.data());
  return p;
}
}  // namespace

TEST_CASE("clip norm: the global L2 norm, scaled only when above the limit") {
  Parameter a = with_gradient("a", {3}, -1), b = with_gradient("b", {0, 4}, -1);
  REQUIRE(train::clip_gradient_norm({&a, &b}, 10.0f, nullptr) == Approx(5.0));
  REQUIRE(b.grad.values.at(1, 0) == 4.0f);  // below the limit: untouched
  REQUIRE(train::clip_gradient_norm({&a, &b}, 1.0f, nullptr) == Approx(5.0));
  REQUIRE(a.grad.values.at(0, 0) == Approx(0.6f));
  REQUIRE(b.grad.values.at(1, 0) == Approx(0.8f));
  REQUIRE(train::global_gradient_norm({&a, &b}, nullptr) == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("clip norm over a model-parallel group: slices summed, replicated parameters counted once") {
  std::mutex mu;
  std::vector<double> norms;
  std::vector<float> scaled;
  comm::run_local(2, [&](comm::Communicator& c) {
    // Slice of a sliced parameter: 3 on rank 0, 4 on rank 1; a replicated one, 12, on both.
    Parameter sliced = with_gradient("s", {c.rank() == 0 ? 3.0f : 4.0f}, 0), shared = with_gradient("r", {12}, -1);
    const double norm = train::clip_gradient_norm({&sliced, &shared}, 1.3f, &c);
    std::lock_guard<std::mutex> lock(mu);
    norms.push_back(norm);
    scaled.push_back(shared.grad.values.at(0, 0));
  });
  REQUIRE(norms[0] == norms[1]);
  REQUIRE(norms[0] == Approx(13.0));  // sqrt(9 + 16 + 144)
  REQUIRE(scaled[0] == scaled[1]);
  REQUIRE(scaled[0] == Approx(1.2f));
}

namespace {
SparseBatch batch_of(size_t points, size_t features) {
  SparseBatch b;
  for (size_t i = 0; i < points; ++i) {
    std::vector<uint32_t> ids;
    std::vector<float> values;
    for (uint32_t f = 0; f < features; ++f) {
      ids.push_back(f * 3 + static_cast<uint32_t>(i % 3));
      values.push_back(1.0f + f);
    }
    const uint32_t label = static_cast<uint32_t>(i);
    b.add_point(ids, values, std::span<const uint32_t>(&label, 1));
  }
  return b;
}
}  // namespace

TEST_CASE("input dropout: drops about p of the entries, scales the rest, reproduces per (seed, step, point)") {
  const SparseBatch in = batch_of(200, 50);
  SparseBatch a, b, c;
  train::drop_input_features(in, {.p = 0.3f, .seed = 5}, 7, 0, 1, a);
  train::drop_input_features(in, {.p = 0.3f, .seed = 5}, 7, 0, 1, b);
  train::drop_input_features(in, {.p = 0.3f, .seed = 5}, 8, 0, 1, c);
  REQUIRE(a.feature_ids == b.feature_ids);
  REQUIRE(a.feature_values == b.feature_values);
  REQUIRE(a.feature_ids != c.feature_ids);  // another step, other draws
  const double kept = double(a.feature_ids.size()) / double(in.feature_ids.size());
  REQUIRE(kept == Approx(0.7).margin(0.02));
  REQUIRE(a.label_ids == in.label_ids);
  REQUIRE(a.size() == in.size());
  // Kept values are scaled by 1 / (1 - p): feature f of a point has value 1 + f / 3 (rounded down).
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a.features_of(i).size(); ++j)
      REQUIRE(a.values_of(i)[j] == Approx((1.0f + a.features_of(i)[j] / 3) / 0.7f));
  // A replica holding points 1, 3, 5, ... of the global batch (first 1, stride 2) drops what one
  // process drops for those points.
  SparseBatch odd, odd_dropped;
  for (size_t i = 1; i < in.size(); i += 2) odd.add_point(in.features_of(i), in.values_of(i), in.labels_of(i));
  train::drop_input_features(odd, {.p = 0.3f, .seed = 5}, 7, 1, 2, odd_dropped);
  for (size_t i = 0; i < odd.size(); ++i) {
    const auto x = odd_dropped.features_of(i), y = a.features_of(2 * i + 1);
    REQUIRE(std::vector<uint32_t>(x.begin(), x.end()) == std::vector<uint32_t>(y.begin(), y.end()));
  }
  SparseBatch none;
  train::drop_input_features(in, {.p = 0.0f}, 7, 0, 1, none);
  REQUIRE(none.feature_values == in.feature_values);
  REQUIRE_THROWS_WITH(train::drop_input_features(in, {.p = 1.0f}, 0, 0, 1, none), Catch::Contains("[0, 1)"));
}

TEST_CASE("early stopping: stops after `patience` epochs without improvement; state round-trips") {
  train::EarlyStopping e(2);
  REQUIRE(e.update(1, 0.5));
  REQUIRE(e.update(2, 0.6));
  REQUIRE_FALSE(e.update(3, 0.6));  // equal is no improvement
  REQUIRE_FALSE(e.should_stop());
  REQUIRE_FALSE(e.update(4, 0.55));
  REQUIRE(e.should_stop());
  REQUIRE(e.state().best == 0.6);
  REQUIRE(e.state().best_epoch == 2);
  const train::EarlyStopping resumed(2, e.state());
  REQUIRE(resumed.should_stop());
  train::EarlyStopping never(0);
  for (uint64_t epoch = 1; epoch < 10; ++epoch) never.update(epoch, 0.1);
  REQUIRE_FALSE(never.should_stop());
}

TEST_CASE("early stopping: scores within an epoch move the best, the epoch's end counts the patience") {
  train::EarlyStopping e(1);
  REQUIRE(e.update(1, 0.5));
  REQUIRE(e.update(2, 0.7, /*step=*/30, /*epoch_end=*/false));  // a long epoch's better middle
  CHECK(e.state().best_step == 30);
  CHECK(e.state().epochs_without_improvement == 0);
  REQUIRE_FALSE(e.update(2, 0.6));  // its end is worse, but epoch 2 improved: no stop
  CHECK_FALSE(e.should_stop());
  CHECK((e.state().best_epoch == 2 && e.state().best_step == 30 && e.state().best == 0.7));
  REQUIRE_FALSE(e.update(3, 0.65, 45, false));
  CHECK(e.state().epochs_without_improvement == 0);  // counted at the epoch's end only
  REQUIRE_FALSE(e.update(3, 0.69));
  CHECK(e.should_stop());
  // A better epoch end is kept at the end (step 0).
  train::EarlyStopping f(2);
  f.update(1, 0.5, 10, false);
  REQUIRE(f.update(1, 0.6));
  CHECK((f.state().best_epoch == 1 && f.state().best_step == 0));
}
