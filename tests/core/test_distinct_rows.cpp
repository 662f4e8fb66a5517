// DistinctRows (core/distinct_rows.h): the distinct ids of a list, ascending, which a layer lists on
// the host for a device backend's row gradient. Checked against sort + unique, across word
// boundaries and repeated calls (the bits are cleared between them), and an id out of range.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/distinct_rows.h"
#include "core/rng.h"

using namespace frugal;

TEST_CASE("DistinctRows lists the distinct ids ascending, call after call") {
  DistinctRows lister(1000);
  CHECK(lister.num_rows() >= 1000);
  Rng rng(7);
  std::vector<uint32_t> out;
  for (int round = 0; round < 20; ++round) {
    std::vector<uint32_t> ids;
    const size_t n = rng.below(300);
    for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>(round % 2 ? rng.below(1000) : 60 + rng.below(10)));
    std::vector<uint32_t> want = ids;
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    lister.list(ids, out);
    CHECK(out == want);
  }
  lister.list({}, out);
  CHECK(out.empty());
  const std::vector<uint32_t> edges = {999, 0, 63, 64, 127, 128, 0, 999};
  lister.list(edges, out);
  CHECK(out == std::vector<uint32_t>{0, 63, 64, 127, 128, 999});
}

TEST_CASE("DistinctRows refuses an id beyond its rows and stays clean for the next call") {
  DistinctRows lister(100);
  std::vector<uint32_t> out;
  const std::vector<uint32_t> bad = {5, 7, 100000};
  CHECK_THROWS_WITH(lister.list(bad, out), Catch::Contains("100000"));
  const std::vector<uint32_t> good = {9, 3};
  lister.list(good, out);
  CHECK(out == std::vector<uint32_t>{3, 9});  // 5 and 7 of the failed call are not left behind
}
