// --slice-weights auto's weighting (core/train/rebalance.h): shares proportional to measured
// throughput, capped by memory, with a minimum share for a very slow rank.
#include <catch2/catch.hpp>
#include <numeric>

#include "core/check.h"
#include "core/placement.h"
#include "core/train/rebalance.h"

using namespace frugal;
using Catch::Matchers::Contains;

namespace {
double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
}  // namespace

TEST_CASE("throughput weights: step times {1, 2} give shares {2/3, 1/3}", "[rebalance]") {
  const std::vector<double> times{1.0, 2.0};
  const RebalancePlan plan = throughput_weights(times);
  REQUIRE(plan.weights.size() == 2);
  CHECK(plan.weights[0] == Approx(2.0 / 3.0));
  CHECK(plan.weights[1] == Approx(1.0 / 3.0));
  CHECK(sum(plan.weights) == Approx(1.0));
  CHECK_FALSE(plan.raised[0]);
  CHECK_FALSE(plan.raised[1]);
}

TEST_CASE("throughput weights: equal times keep equal shares, and the current shares count", "[rebalance]") {
  const std::vector<double> equal{0.5, 0.5, 0.5};
  for (const double w : throughput_weights(equal).weights) CHECK(w == Approx(1.0 / 3.0));
  // Rank 1 owns twice the neurons and takes twice as long: both are as fast per neuron, so the
  // shares become equal; in the same time it is twice as fast and keeps its 2/3.
  const std::vector<double> slower{1.0, 2.0}, current{1.0, 2.0};
  for (const double w : throughput_weights(slower, current).weights) CHECK(w == Approx(0.5));
  const std::vector<double> times{1.0, 1.0};
  const RebalancePlan plan = throughput_weights(times, current);
  CHECK(plan.weights[0] == Approx(1.0 / 3.0));
  CHECK(plan.weights[1] == Approx(2.0 / 3.0));
  // The slices follow: 300 labels split 100 / 200.
  CHECK(slice_bounds(300, 2, plan.weights) == std::vector<size_t>{0, 100, 300});
}

TEST_CASE("throughput weights: a memory cap moves the rest to the others", "[rebalance]") {
  const std::vector<double> times{1.0, 2.0, 4.0};  // shares 4/7, 2/7, 1/7 uncapped
  RebalanceOptions o;
  o.max_share = {0.4, 1.0, 1.0};
  const RebalancePlan plan = throughput_weights(times, {}, o);
  CHECK(plan.weights[0] == Approx(0.4));
  CHECK(plan.capped[0]);
  CHECK(plan.weights[1] == Approx(0.6 * 2.0 / 3.0));  // the rest, 0.6, by throughput 2 : 1
  CHECK(plan.weights[2] == Approx(0.6 / 3.0));
  CHECK(sum(plan.weights) == Approx(1.0));
  o.max_share = {0.3, 0.3, 0.3};
  CHECK_THROWS_WITH(throughput_weights(times, {}, o), Contains("memory caps hold 0.900"));
}

TEST_CASE("throughput weights: a very slow rank keeps the minimum share, and says so", "[rebalance]") {
  const std::vector<double> times{1.0, 1.0, 100.0};  // rank 2: 0.5% of the group's throughput
  const RebalancePlan plan = throughput_weights(times);
  CHECK(plan.raised[2]);
  CHECK(plan.weights[2] == Approx(0.05));
  CHECK(plan.weights[0] == Approx(0.475));
  CHECK(plan.weights[1] == Approx(0.475));
  CHECK(sum(plan.weights) == Approx(1.0));
  // Every slice stays non-empty (a Placement has no empty slices).
  const auto b = slice_bounds(1000, 3, plan.weights);
  for (size_t r = 0; r < 3; ++r) CHECK(b[r + 1] > b[r]);
  // A lower minimum is honoured.
  const RebalancePlan low = throughput_weights(times, {}, {.min_share = 0.001, .max_share = {}});
  CHECK_FALSE(low.raised[2]);
  CHECK(low.weights[2] == Approx(1.0 / 201.0));
}

TEST_CASE("throughput weights: bad step times are refused", "[rebalance]") {
  CHECK_THROWS_WITH(throughput_weights(std::vector<double>{1.0, 0.0}), Contains("rank 1's step time"));
  CHECK_THROWS_WITH(throughput_weights(std::vector<double>{}), Contains("no step times"));
  CHECK_THROWS_WITH(throughput_weights(std::vector<double>{1.0, 1.0}, std::vector<double>{1.0}),
                    Contains("1 current weights for 2 ranks"));
}

TEST_CASE("throughput weights: deterministic", "[rebalance]") {
  const std::vector<double> times{0.013, 0.029, 0.0071, 0.5};
  const RebalancePlan a = throughput_weights(times), b = throughput_weights(times);
  CHECK(a.weights == b.weights);
}
