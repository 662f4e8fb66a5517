// --slice-weights auto's weighting (train/rebalance.h): shares proportional to measured
// throughput, capped by memory, with a minimum share for a very slow rank.
#include <catch2/catch.hpp>
#include <numeric>

#include "core/check.h"
#include "core/host_memory.h"
#include "core/placement.h"
#include "train/rebalance.h"

using namespace frugal;
using Catch::Matchers::Contains;

namespace {
double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
}  // namespace

TEST_CASE("throughput weights: step times {1, 2} give shares {2/3, 1/3}", "[rebalance]") {
  const std::vector<double> times{1.0, 2.0};
  const train::RebalancePlan plan = train::throughput_weights(times);
  REQUIRE(plan.weights.size() == 2);
  CHECK(plan.weights[0] == Approx(2.0 / 3.0));
  CHECK(plan.weights[1] == Approx(1.0 / 3.0));
  CHECK(sum(plan.weights) == Approx(1.0));
  CHECK_FALSE(plan.raised[0]);
  CHECK_FALSE(plan.raised[1]);
}

TEST_CASE("throughput weights: equal times keep equal shares, and the current shares count", "[rebalance]") {
  const std::vector<double> equal{0.5, 0.5, 0.5};
  for (const double w : train::throughput_weights(equal).weights) CHECK(w == Approx(1.0 / 3.0));
  // Rank 1 owns twice the neurons and takes twice as long: both are as fast per neuron, so the
  // shares become equal; in the same time it is twice as fast and keeps its 2/3.
  const std::vector<double> slower{1.0, 2.0}, current{1.0, 2.0};
  for (const double w : train::throughput_weights(slower, current).weights) CHECK(w == Approx(0.5));
  const std::vector<double> times{1.0, 1.0};
  const train::RebalancePlan plan = train::throughput_weights(times, current);
  CHECK(plan.weights[0] == Approx(1.0 / 3.0));
  CHECK(plan.weights[1] == Approx(2.0 / 3.0));
  // The slices follow: 300 labels split 100 / 200.
  CHECK(slice_bounds(300, 2, plan.weights) == std::vector<size_t>{0, 100, 300});
}

TEST_CASE("throughput weights: a memory cap moves the rest to the others", "[rebalance]") {
  const std::vector<double> times{1.0, 2.0, 4.0};  // shares 4/7, 2/7, 1/7 uncapped
  train::RebalanceOptions o;
  o.max_share = {0.4, 1.0, 1.0};
  const train::RebalancePlan plan = train::throughput_weights(times, {}, o);
  CHECK(plan.weights[0] == Approx(0.4));
  CHECK(plan.capped[0]);
  CHECK(plan.weights[1] == Approx(0.6 * 2.0 / 3.0));  // the rest, 0.6, by throughput 2 : 1
  CHECK(plan.weights[2] == Approx(0.6 / 3.0));
  CHECK(sum(plan.weights) == Approx(1.0));
  o.max_share = {0.3, 0.3, 0.3};
  CHECK_THROWS_WITH(train::throughput_weights(times, {}, o), Contains("memory caps hold 0.900"));
}

TEST_CASE("throughput weights: a very slow rank is left out (an empty slice), and says so", "[rebalance]") {
  const std::vector<double> times{1.0, 1.0, 100.0};  // rank 2: 0.5% of the group's throughput
  // At its minimum share (5%) rank 2 would take 15 s a step where the other two take 1.5 s
  // without it: it gets nothing.
  const train::RebalancePlan plan = train::throughput_weights(times);
  CHECK(plan.left_out[2]);
  CHECK_FALSE(plan.left_out[0]);
  CHECK(plan.weights[2] == 0.0);
  CHECK(plan.weights[0] == Approx(0.5));
  CHECK(plan.weights[1] == Approx(0.5));
  CHECK(plan.predicted_step_seconds == Approx(1.5));
  const auto b = slice_bounds(1000, 3, plan.weights);
  CHECK(b == std::vector<size_t>{0, 500, 1000, 1000});
  // Without leaving out, it keeps the minimum share (the rule before empty slices).
  const train::RebalancePlan kept = train::throughput_weights(times, {}, {.leave_out_slow = false, .max_share = {}});
  CHECK(kept.raised[2]);
  CHECK(kept.weights[2] == Approx(0.05));
  CHECK(kept.weights[0] == Approx(0.475));
  CHECK(kept.weights[1] == Approx(0.475));
  CHECK(sum(kept.weights) == Approx(1.0));
  CHECK(kept.predicted_step_seconds == Approx(15.0));
  // A lower minimum is honoured, and then its thin slice pays: the step is shorter with it.
  const train::RebalancePlan low = train::throughput_weights(times, {}, {.min_share = 0.001, .max_share = {}});
  CHECK_FALSE(low.raised[2]);
  CHECK_FALSE(low.left_out[2]);
  CHECK(low.weights[2] == Approx(1.0 / 201.0));
}

TEST_CASE("throughput weights: a GPU rank next to CPU ranks; the raise pays just below the minimum",
          "[rebalance]") {
  // A GPU rank 100x a CPU rank's speed: the CPU ranks' proportional shares (1% each) are below
  // the minimum, and raising them would make each a 5x slower step than the GPU's alone.
  const train::RebalancePlan mixed = train::throughput_weights(std::vector<double>{0.01, 1.0, 1.0});
  CHECK(mixed.weights == std::vector<double>{1.0, 0.0, 0.0});
  CHECK(mixed.left_out == std::vector<bool>{false, true, true});
  CHECK(mixed.predicted_step_seconds == Approx(0.03));  // its 1/3 took 0.01 s: the whole, 0.03 s
  // Rank 0 is never left out (it prints and logs for the group): slow, it keeps the minimum share.
  const train::RebalancePlan first = train::throughput_weights(std::vector<double>{1.0, 0.01, 0.01});
  CHECK_FALSE(first.left_out[0]);
  CHECK(first.raised[0]);
  CHECK(first.weights[0] == Approx(0.05));
  CHECK(first.weights[1] == Approx(0.475));
  const train::RebalancePlan any = train::throughput_weights(std::vector<double>{1.0, 0.01, 0.01}, {},
                                               {.keep_first = false, .max_share = {}});
  CHECK(any.left_out == std::vector<bool>{true, false, false});
  // Just below the minimum (4.9% of the throughput) the raise costs less than doing without it.
  const double slow = 0.951 / 0.049;
  const train::RebalancePlan near = train::throughput_weights(std::vector<double>{1.0, slow});
  CHECK(near.raised[1]);
  CHECK_FALSE(near.left_out[1]);
  CHECK(near.weights[1] == Approx(0.05));
  // The fastest rank's memory cap keeps the slow rank in: without it the model does not fit.
  const train::RebalancePlan capped = train::throughput_weights(std::vector<double>{0.01, 1.0}, {}, {.max_share = {0.8, 1.0}});
  CHECK(capped.weights[0] == Approx(0.8));
  CHECK(capped.weights[1] == Approx(0.2));
  CHECK_FALSE(capped.left_out[1]);
  // A rank already left out (current weight 0, no compute measured) stays out.
  const train::RebalancePlan again = train::throughput_weights(std::vector<double>{0.5, 0.0}, std::vector<double>{1.0, 0.0});
  CHECK(again.weights == std::vector<double>{1.0, 0.0});
  CHECK_THROWS_WITH(train::throughput_weights(std::vector<double>{0.5, 0.0}, std::vector<double>{0.0, 0.0}),
                    Contains("every current weight is 0"));
}

TEST_CASE("throughput weights: a rank whose exchanges cost more than its compute saves is left out",
          "[rebalance]") {
  // Two equal ranks at 1 s a step each on half the model: alone, one takes 2 s; together 1 s of
  // compute plus the exchanges.
  const std::vector<double> times{1.0, 1.0};
  const train::RebalancePlan cheap = train::throughput_weights(times, {}, {.exchange_seconds = 0.6, .max_share = {}});
  CHECK(cheap.weights == std::vector<double>{0.5, 0.5});
  CHECK(cheap.predicted_step_seconds == Approx(1.6));
  const train::RebalancePlan dear = train::throughput_weights(times, {}, {.exchange_seconds = 1.5, .max_share = {}});
  CHECK(dear.weights == std::vector<double>{1.0, 0.0});
  CHECK(dear.left_out[1]);
  CHECK(dear.predicted_step_seconds == Approx(2.0));
  // Three ranks: each beyond the first is charged half of the whole group's exchange time.
  const std::vector<double> three{1.0, 1.0, 1.0};  // alone 3 s, two 1.5 s, three 1 s of compute
  const train::RebalancePlan mid = train::throughput_weights(three, {}, {.exchange_seconds = 1.2, .max_share = {}});
  CHECK(mid.left_out == std::vector<bool>{false, false, true});  // 1.5 + 0.6 < 1 + 1.2 < 3
  CHECK(mid.predicted_step_seconds == Approx(2.1));
  CHECK_THROWS_WITH(train::throughput_weights(times, {}, {.exchange_seconds = -1.0, .max_share = {}}),
                    Contains("exchange_seconds -1"));
}

TEST_CASE("slice bounds: a weight of 0 gives an empty slice; the others keep at least one item", "[rebalance]") {
  CHECK(slice_bounds(10, 3, std::vector<double>{1, 0, 1}) == std::vector<size_t>{0, 5, 5, 10});
  CHECK(slice_bounds(10, 2, std::vector<double>{0, 1}) == std::vector<size_t>{0, 0, 10});
  CHECK(slice_bounds(3, 4, std::vector<double>{1000, 0, 1, 1}) == std::vector<size_t>{0, 1, 1, 2, 3});
  CHECK_THROWS_WITH(slice_bounds(10, 2, std::vector<double>{0, 0}), Contains("at least one rank"));
  CHECK_THROWS_WITH(slice_bounds(10, 2, std::vector<double>{1, -1}), Contains(">= 0"));
}

TEST_CASE("throughput weights: bad step times are refused", "[rebalance]") {
  CHECK_THROWS_WITH(train::throughput_weights(std::vector<double>{1.0, 0.0}), Contains("rank 1's step time"));
  CHECK_THROWS_WITH(train::throughput_weights(std::vector<double>{}), Contains("no step times"));
  CHECK_THROWS_WITH(train::throughput_weights(std::vector<double>{1.0, 1.0}, std::vector<double>{1.0}),
                    Contains("1 current weights for 2 ranks"));
}

TEST_CASE("throughput weights: deterministic", "[rebalance]") {
  const std::vector<double> times{0.013, 0.029, 0.0071, 0.5};
  const train::RebalancePlan a = train::throughput_weights(times), b = train::throughput_weights(times);
  CHECK(a.weights == b.weights);
}

TEST_CASE("memory cap: the share whose state fits what the rank holds now plus 80% of its free memory",
          "[rebalance]") {
  // 100 MB of state at share 0.25 and 100 MB free: 80 MB more state, so share 0.25 * 180 / 100.
  CHECK(train::memory_cap(0.25, 100e6, 100e6) == Approx(0.45));
  CHECK(train::memory_cap(0.25, 100e6, 100e6, 0.5) == Approx(0.375));
  CHECK(train::memory_cap(0.25, 100e6, 1e12) == 1.0);     // plenty: never above the whole model
  CHECK(train::memory_cap(0.25, 100e6, 0.0) == Approx(0.25));  // full: keeps what it has
  CHECK(train::memory_cap(0.25, 100e6, std::nullopt) == 1.0);  // unknown memory: no cap
  CHECK(train::memory_cap(0.25, 0.0, 1e6) == 1.0);             // no state to scale from: no cap
  CHECK(train::memory_cap(0.0, 1.0, 1.0) == 1.0);              // a rank left out holds nothing to scale from
  CHECK_THROWS_WITH(train::memory_cap(-0.1, 1.0, 1.0), Contains("share -0.1 is not in [0, 1]"));
  CHECK_THROWS_WITH(train::memory_cap(0.5, 1.0, 1.0, 1.5), Contains("headroom 1.5"));
}

TEST_CASE("memory cap: the caps feed the weighting, and caps that cannot hold the model are refused",
          "[rebalance]") {
  // Rank 0 is 3x faster but its memory holds 0.45 of the model: it gets 0.45, rank 1 the rest.
  const std::vector<double> times{1.0, 3.0}, current{1.0, 1.0};
  const std::vector<double> caps{train::memory_cap(0.5, 200e6, 50e6), train::memory_cap(0.5, 200e6, 1e9)};
  CHECK(caps[0] == Approx(0.6));
  CHECK(caps[1] == 1.0);
  const train::RebalancePlan plan = train::throughput_weights(times, current, {.max_share = caps});
  CHECK(plan.weights[0] == Approx(0.6));
  CHECK(plan.capped[0]);
  CHECK_FALSE(plan.capped[1]);
  CHECK(plan.weights[1] == Approx(0.4));
  CHECK_THROWS_WITH(train::throughput_weights(times, current, {.max_share = {0.4, 0.5}}),
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
