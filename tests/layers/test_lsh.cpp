// LSH quality: on planted data, the neuron with the largest inner product with the query must be in
// the query's active set in >= 90% of queries, with the default K and L, for both families.
#include <catch2/catch.hpp>

#include "core/rng.h"
#include "layers/lsh/lsh_sampler.h"

using namespace frugal;

namespace {

double planted_recall(const lsh::Family& base, size_t neurons, size_t dim, size_t queries) {
  lsh::Family family = base;
  const int k = lsh::default_k(family, 50, neurons);
  std::visit([k](auto& f) { f.k = k; }, family);
  Rng rng(21);
  Tensor w(neurons, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  lsh::LshSampler sampler({.family = family, .tables = 50}, dim, neurons, 99);
  sampler.rebuild(w, 0);
  // Each query is a neuron's weight vector plus noise; the planted neuron must remain the one with
  // the largest inner product (checked), so the query's true nearest neighbour is known.
  Tensor q(queries, dim);
  std::vector<uint32_t> best(queries);
  for (size_t i = 0; i < queries; ++i) {
    const auto target = static_cast<uint32_t>(rng.below(neurons));
    for (size_t c = 0; c < dim; ++c) q.at(i, c) = w.at(target, c) + 0.5f * rng.normal();
    float best_ip = -1e30f;
    for (uint32_t n = 0; n < neurons; ++n) {
      float ip = 0;
      for (size_t c = 0; c < dim; ++c) ip += q.at(i, c) * w.at(n, c);
      if (ip > best_ip) best_ip = ip, best[i] = n;
    }
    REQUIRE(best[i] == target);
  }
  ActiveSets active;
  sampler.sample(q, nullptr, 0, 1, active);
  size_t found = 0;
  double mean_size = 0;
  for (size_t i = 0; i < queries; ++i) {
    const auto* b = active.ids.data() + active.offsets[i];
    const auto* e = active.ids.data() + active.offsets[i + 1];
    found += std::find(b, e, best[i]) != e;
    mean_size += static_cast<double>(e - b) / queries;
  }
  INFO("k " << k << ", mean active set " << mean_size << " of " << neurons);
  CHECK(mean_size < 0.2 * neurons);  // sampling must actually sample
  return static_cast<double>(found) / queries;
}

}  // namespace

TEST_CASE("LSH: planted nearest neuron is found (DWTA)") {
  REQUIRE(planted_recall(lsh::Dwta{}, 20000, 128, 300) >= 0.9);
}

TEST_CASE("LSH: planted nearest neuron is found (SimHash)") {
  REQUIRE(planted_recall(lsh::SimHash{}, 20000, 128, 300) >= 0.9);
}

TEST_CASE("LSH: active sets honour the bounds and contain the true labels") {
  Rng rng(5);
  const size_t n = 2000, dim = 32;
  Tensor w(n, dim), h(8, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = std::max(0.0f, rng.normal());
  SparseBatch labels;
  for (uint32_t i = 0; i < 8; ++i) {
    const uint32_t ls[] = {i * 7, i * 7 + 1};
    labels.add_point({}, {}, ls);
  }
  for (const auto& [lo, hi] : {std::pair<size_t, size_t>{100, 150}, {0, 20}, {300, 0}}) {
    lsh::LshSampler sampler({.family = lsh::Dwta{.k = 2}, .tables = 10, .min_active = lo, .max_active = hi}, dim, n, 3);
    sampler.rebuild(w, 0);
    ActiveSets a;
    sampler.sample(h, &labels, 0, 7, a);
    for (size_t i = 0; i < 8; ++i) {
      const size_t size = a.offsets[i + 1] - a.offsets[i];
      if (lo > 0) REQUIRE(size >= lo);
      if (hi > 0) REQUIRE(size <= hi);
      REQUIRE(a.ids[a.offsets[i]] == i * 7);
      REQUIRE(a.ids[a.offsets[i] + 1] == i * 7 + 1);
      std::vector<uint32_t> ids(a.ids.begin() + a.offsets[i], a.ids.begin() + a.offsets[i + 1]);
      std::sort(ids.begin(), ids.end());
      REQUIRE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // no duplicates
    }
    ActiveSets again;
    sampler.sample(h, &labels, 0, 7, again);
    REQUIRE(again.ids == a.ids);  // deterministic for a step
  }
}

TEST_CASE("LSH: rebuild schedule starts frequent and decays") {
  lsh::LshSampler s({.family = lsh::SimHash{.k = 4}, .tables = 2, .rebuild_first = 10, .rebuild_growth = 2.0,
                     .rebuild_max = 50}, 4, 10, 1);
  Tensor w(10, 4);
  w.fill(0.5f);
  std::vector<uint64_t> at;
  for (uint64_t step = 0; step < 200; ++step)
    if (s.maybe_rebuild(w, step)) at.push_back(step);
  REQUIRE(at == std::vector<uint64_t>{0, 10, 30, 70, 120, 170});
}
