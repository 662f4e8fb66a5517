// Ranking metrics (core/ranking_metrics.h) and propensities (core/propensity.h) against values
// worked out by hand (the arithmetic is in the comments).
#include <catch2/catch.hpp>
#include <cmath>

#include "core/check.h"
#include "core/metrics.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"

using namespace frugal;

namespace {

// Point 0: labels {3, 5}, predicted [5, 0, 3]: hits at ranks 1 and 3.
// Point 1: labels {1},    predicted [2, 4, 1]: a hit at rank 3.
// Point 2: no labels,     predicted [1, 2, 3]: counts 0 everywhere.
SparseBatch three_points() {
  SparseBatch b;
  const uint32_t l0[] = {3, 5}, l1[] = {1};
  b.add_point({}, {}, l0);
  b.add_point({}, {}, l1);
  b.add_point({}, {}, {});
  return b;
}
const std::vector<uint32_t> kTop = {5, 0, 3, 2, 4, 1, 1, 2, 3};

// Training counts: label 1 once, label 3 ten times, label 5 a hundred times, of 200 points.
LabelCounts counts() {
  LabelCounts c;
  c.points = 200;
  c.per_label = {0, 1, 0, 10, 0, 100};
  return c;
}

}  // namespace

TEST_CASE("propensities: Jain et al.'s formula with A = 0.55, B = 1.5") {
  LabelCounts c;
  c.points = 100;
  c.per_label = {10, 0, 1000};
  const Propensities p(c);
  // C = (ln 100 - 1) * 2.5^0.55 = 3.605170 * 1.655264 = 5.967510;
  // 1/p = 1 + C * (N_l + 1.5)^-0.55: N_l = 10 -> 1 + 5.967510 * 11.5^-0.55 = 2.557432.
  CHECK(p.inverse(0) == Approx(2.557432).epsilon(1e-6));
  CHECK(p.propensity(0) == Approx(1 / 2.557432).epsilon(1e-6));
  CHECK(p.inverse(1) == Approx(5.774661).epsilon(1e-6));  // never seen: 1 + C * 1.5^-0.55
  CHECK(p.inverse(2) == Approx(1.133486).epsilon(1e-6));  // frequent labels weigh little
  CHECK(p.inverse(99) == p.inverse(1));                    // beyond the counts: never seen
  // Other A, B: C = 3.605170 * 1.4^0.5 = 4.265695; 1 + C * 10.4^-0.5 = 2.322736.
  CHECK(Propensities(c, {.a = 0.5, .b = 0.4}).inverse(0) == Approx(2.322736).epsilon(1e-6));
  CHECK_THROWS_AS(Propensities(c, {.a = 0}), frugal::Error);
  CHECK_THROWS_AS(Propensities(LabelCounts{}), frugal::Error);
}

TEST_CASE("label counts of a data set") {
  data::Dataset d;
  d.num_labels = 4;
  const uint32_t a[] = {0, 2}, b[] = {2};
  d.points.add_point({}, {}, a);
  d.points.add_point({}, {}, b);
  d.points.add_point({}, {}, {});
  const LabelCounts c = LabelCounts::of(d);
  CHECK(c.points == 3);
  CHECK(c.per_label == std::vector<uint64_t>{1, 0, 2, 0});
}

TEST_CASE("ranking metrics: P@k, nDCG@k, recall@k, coverage@k by hand") {
  RankingMetrics m({1, 3});
  m.add(three_points(), kTop);
  const RankingScores s = m.values();
  CHECK(m.points() == 3);
  // P@1: (1 + 0 + 0) / 3; P@3: (2/3 + 1/3 + 0) / 3.
  CHECK(s.precision.at(1) == Approx(1.0 / 3));
  CHECK(s.precision.at(3) == Approx(1.0 / 3));
  // nDCG@1: point 0 has its perfect first label: (1 + 0 + 0) / 3.
  CHECK(s.ndcg.at(1) == Approx(1.0 / 3));
  // nDCG@3: point 0: DCG = 1 + 1/log2(4) = 1.5, IDCG = 1 + 1/log2(3) = 1.630930: 0.919721;
  // point 1: DCG = 1/log2(4) = 0.5, IDCG = 1: 0.5. Mean (0.919721 + 0.5 + 0) / 3 = 0.473240.
  CHECK(s.ndcg.at(3) == Approx(0.473240).epsilon(1e-5));
  // recall@1: (1/2 + 0 + 0) / 3; recall@3: (2/2 + 1/1 + 0) / 3.
  CHECK(s.recall.at(1) == Approx(1.0 / 6));
  CHECK(s.recall.at(3) == Approx(2.0 / 3));
  // Test labels {1, 3, 5}; hits within the top 1: {5}; within the top 3: {5, 3, 1}.
  CHECK(s.coverage.at(1) == Approx(1.0 / 3));
  CHECK(s.coverage.at(3) == Approx(1.0));
  CHECK(s.psp.empty());  // no propensities: left out
  CHECK(s.psndcg.empty());
}

TEST_CASE("ranking metrics: PSP@k and PSnDCG@k by hand") {
  const Propensities p(counts());
  // 1/p over 200 training points: label 1 (1 point) 5.298317, label 3 (10) 2.856871,
  // label 5 (100) 1.560543.
  const double w1 = p.inverse(1), w3 = p.inverse(3), w5 = p.inverse(5);
  CHECK(w1 == Approx(5.298317).epsilon(1e-6));
  CHECK(w3 == Approx(2.856871).epsilon(1e-6));
  CHECK(w5 == Approx(1.560543).epsilon(1e-6));
  RankingMetrics m({1, 3}, &p);
  m.add(three_points(), kTop);
  const RankingScores s = m.values();
  // PSP@1 = sum of 1/p of top-1 hits / sum of the best top-1 (each point's rarest true label):
  // w5 / (w3 + w1) = 1.560543 / 8.155188 = 0.191356.
  CHECK(s.psp.at(1) == Approx(w5 / (w3 + w1)));
  CHECK(s.psp.at(1) == Approx(0.191356).epsilon(1e-5));
  // PSP@3: every true label is found within 3: (w5 + w3 + w1) / (w3 + w5 + w1) = 1.
  CHECK(s.psp.at(3) == Approx(1.0));
  // PSnDCG@3: point 0 found w5 at rank 1 and w3 at rank 3 where the best is w3 then w5:
  // (w5 + w3/2) / IDCG0 against (w3 + w5/log2(3)) / IDCG0, IDCG0 = 1.630930; point 1 found w1 at
  // rank 3 (w1/2) against w1 at rank 1 (IDCG1 = 1): 0.585579.
  const double idcg0 = 1 + 1 / std::log2(3.0);
  CHECK(s.psndcg.at(3) == Approx(((w5 + w3 / 2) / idcg0 + w1 / 2) / ((w3 + w5 / std::log2(3.0)) / idcg0 + w1)));
  CHECK(s.psndcg.at(3) == Approx(0.585579).epsilon(1e-5));
  CHECK(s.psndcg.at(1) == Approx(s.psp.at(1)));  // at k = 1 both are the same ratio
}

TEST_CASE("ranking metrics: short rows, missing predictions, agreement with PrecisionAtK, key names") {
  // Two predictions per point where k = 3 (a model with two labels): ranks beyond them miss.
  SparseBatch b;
  const uint32_t l0[] = {0}, l1[] = {1, 0};
  b.add_point({}, {}, l0);
  b.add_point({}, {}, l1);
  const std::vector<uint32_t> top = {1, 0, 0, UINT32_MAX};
  RankingMetrics m({1, 3});
  m.add(b, top);
  const RankingScores s = m.values();
  // Point 0: hit at rank 2; point 1: hit at rank 1, nothing at rank 2.
  CHECK(s.precision.at(1) == Approx(0.5));
  CHECK(s.precision.at(3) == Approx((1.0 / 3 + 1.0 / 3) / 2));
  CHECK(s.recall.at(3) == Approx((1.0 + 0.5) / 2));
  PrecisionAtK p({1, 3});
  p.add(three_points(), kTop);
  RankingMetrics r({1, 3});
  r.add(three_points(), kTop);
  CHECK(r.values().precision == p.values());
  const auto named = RankingMetrics({1, 5}, nullptr).values().named();
  std::vector<std::string> keys;
  for (const auto& kv : named) keys.push_back(kv.first);
  CHECK(keys == std::vector<std::string>{"p@1", "p@5", "ndcg@1", "ndcg@5", "recall@1", "recall@5", "coverage@1",
                                         "coverage@5"});
  CHECK_THROWS_AS(m.add(b, {1, 2, 3}), frugal::Error);  // 3 predictions do not split into 2 rows
}
