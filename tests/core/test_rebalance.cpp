// --slice-weights auto's weighting (core/train/rebalance.h): shares proportional to measured
// throughput, capped by memory, with a minimum share for a very slow rank.
#include <catch2/catch.hpp>
#include <numeric>

#include "core/check.h"
#include "core/host_memory.h"
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

TEST_CASE("memory cap: the share whose state fits what the rank holds now plus 80% of its free memory",
          "[rebalance]") {
  // 100 MB of state at share 0.25 and 100 MB free: 80 MB more state, so share 0.25 * 180 / 100.
  CHECK(memory_cap(0.25, 100e6, 100e6) == Approx(0.45));
  CHECK(memory_cap(0.25, 100e6, 100e6, 0.5) == Approx(0.375));
  CHECK(memory_cap(0.25, 100e6, 1e12) == 1.0);     // plenty: never above the whole model
  CHECK(memory_cap(0.25, 100e6, 0.0) == Approx(0.25));  // full: keeps what it has
  CHECK(memory_cap(0.25, 100e6, std::nullopt) == 1.0);  // unknown memory: no cap
  CHECK(memory_cap(0.25, 0.0, 1e6) == 1.0);             // no state to scale from: no cap
  CHECK_THROWS_WITH(memory_cap(0.0, 1.0, 1.0), Contains("share 0 is not in (0, 1]"));
  CHECK_THROWS_WITH(memory_cap(0.5, 1.0, 1.0, 1.5), Contains("headroom 1.5"));
}

TEST_CASE("memory cap: the caps feed the weighting, and caps that cannot hold the model are refused",
          "[rebalance]") {
  // Rank 0 is 3x faster but its memory holds 0.45 of the model: it gets 0.45, rank 1 the rest.
  const std::vector<double> times{1.0, 3.0}, current{1.0, 1.0};
  const std::vector<double> caps{memory_cap(0.5, 200e6, 50e6), memory_cap(0.5, 200e6, 1e9)};
  CHECK(caps[0] == Approx(0.6));
  CHECK(caps[1] == 1.0);
  const RebalancePlan plan = throughput_weights(times, current, {.max_share = caps});
  CHECK(plan.weights[0] == Approx(0.6));
  CHECK(plan.capped[0]);
  CHECK_FALSE(plan.capped[1]);
  CHECK(plan.weights[1] == Approx(0.4));
  CHECK_THROWS_WITH(throughput_weights(times, current, {.max_share = {0.4, 0.5}}),
                    Contains("memory caps hold 0.900 of the model"));
}

TEST_CASE("host memory: MemAvailable and the cgroup's room are read from their texts", "[rebalance]") {
  CHECK(parse_mem_available("MemTotal:       24576000 kB\nMemFree:  1000 kB\nMemAvailable:   2048 kB\n") ==
        uint64_t{2048} * 1024);
  CHECK_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
  CHECK_FALSE(parse_mem_available("MemAvailable: lots\n").has_value());
  CHECK_FALSE(parse_mem_available("XMemAvailable: 5 kB\n").has_value());
  CHECK(cgroup_room("1000\n", "400\n") == uint64_t{600});
  CHECK(cgroup_room("1000\n", "1400\n") == uint64_t{0});
  CHECK_FALSE(cgroup_room("max\n", "400\n").has_value());
  // On this machine (Linux): something is available.
  const std::optional<uint64_t> here = host_memory_available();
  REQUIRE(here.has_value());
  CHECK(*here > 0);
}
