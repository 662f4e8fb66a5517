#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "core/rng.h"

TEST_CASE("rng: same seed gives same stream, splits are independent and reproducible") {
  frugal::Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    REQUIRE(x == b.next_u64());
    REQUIRE(x != c.next_u64());
  }
  const frugal::Rng root(7);
  REQUIRE(root.split(1).state() == root.split(1).state());
  REQUIRE(root.split(1).state() != root.split(2).state());
}

TEST_CASE("rng: uniform and normal have the right moments") {
  frugal::Rng r(1);
  double su = 0, sn = 0, sn2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float u = r.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    su += u;
    const float z = r.normal();
    REQUIRE(std::isfinite(z));
    sn += z;
    sn2 += double(z) * z;
  }
  REQUIRE(su / n == Approx(0.5).margin(0.01));
  REQUIRE(sn / n == Approx(0.0).margin(0.01));
  REQUIRE(sn2 / n == Approx(1.0).margin(0.02));
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(r.below(10));
  REQUIRE(seen.size() == 10);
  REQUIRE(*seen.rbegin() == 9);
}
