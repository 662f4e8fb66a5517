#include <catch2/catch.hpp>

#include "core/optim/adam.h"
#include "core/metrics.h"

using namespace frugal;

TEST_CASE("P@k counts hits among the first k predictions; label-less points count as 0") {
  SparseBatch b;
  const uint32_t l0[] = {3, 5}, l1[] = {1};
  b.add_point({}, {}, l0);
  b.add_point({}, {}, l1);
  b.add_point({}, {}, {});
  PrecisionAtK p({1, 3});
  // point 0: 5 first (hit), point 1: 1 third, point 2: nothing to hit
  p.add(b, {5, 0, 3, 2, 4, 1, 1, 2, 3});
  REQUIRE(p.value(1) == Approx(1.0 / 3));
  REQUIRE(p.value(3) == Approx((2.0 / 3 + 1.0 / 3) / 3));
}

TEST_CASE("Adam: lazy rows, per-row bias correction") {
  Parameter w{"w", Tensor(3, 2), {}};
  optim::AdamOptimizer adam({.lr = 0.1f}, {&w});
  w.grad.rows = {1};
  w.grad.values = Tensor(1, 2);
  w.grad.values.fill(2.0f);
  adam.step();
  // First step of a row moves it by lr * sign(g) (bias correction makes m/sqrt(v) = 1).
  REQUIRE(w.value.at(1, 0) == Approx(-0.1f).epsilon(1e-4));
  REQUIRE(w.value.at(0, 0) == 0.0f);
  REQUIRE(w.value.at(2, 1) == 0.0f);
  // Row 2's first update is also a full-size step, though the optimizer has run before.
  w.grad.rows = {2};
  adam.step();
  REQUIRE(w.value.at(2, 0) == Approx(-0.1f).epsilon(1e-4));
  REQUIRE_THROWS(optim::Adam{.lr = -1}.validate());
}
