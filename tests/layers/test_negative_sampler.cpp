// Random negatives of the LSH softmax: the alias table draws by its proposal, and the logQ
// correction makes the drawn labels an unbiased stand-in for every label outside the active set.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "core/sparse_batch.h"
#include "layers/lsh/lsh_sampler.h"
#include "layers/lsh/negative_sampler.h"

using namespace frugal;

TEST_CASE("negative sampler: draws follow (1 - u) * frequency + u * uniform") {
  lsh::NegativeSampler s(5, 0.5);
  for (uint32_t j = 0; j < 5; ++j) REQUIRE(s.probability(j) == Approx(0.2));  // uniform before counts
  const std::vector<uint32_t> counts{70, 20, 10, 0, 0};
  s.set_counts(counts);
  const std::vector<double> want{0.45, 0.2, 0.15, 0.1, 0.1};
  std::vector<double> seen(5, 0.0);
  Rng rng(7);
  const size_t n = 400000;
  for (size_t i = 0; i < n; ++i) seen[s.draw(rng)] += 1.0 / n;
  for (uint32_t j = 0; j < 5; ++j) {
    INFO("label " << j);
    CHECK(s.probability(j) == Approx(want[j]));
    CHECK(seen[j] == Approx(want[j]).margin(0.004));
  }
}

TEST_CASE("negative sampler: labels that never occur keep a uniform proposal; bad input is refused") {
  lsh::NegativeSampler s(4, 0.25);
  s.set_counts(std::vector<uint32_t>{0, 0, 0, 0});
  for (uint32_t j = 0; j < 4; ++j) CHECK(s.probability(j) == Approx(0.25));
  CHECK_THROWS_WITH(s.set_counts(std::vector<uint32_t>{1, 2}), Catch::Contains("2 label counts for 4 labels"));
  CHECK_THROWS_WITH(lsh::NegativeSampler(4, 1.5), Catch::Contains("uniform share"));
  CHECK_THROWS_WITH(lsh::LshOptions{.negatives = size_t{1} << 21}.validate(), Catch::Contains("negatives must be at most"));
  CHECK_THROWS_WITH(lsh::LshOptions{.negative_uniform_share = -0.1}.validate(), Catch::Contains("negative_uniform_share"));
}

TEST_CASE("LSH sampler: negatives follow the exact entries, with logQ offsets that estimate the rest") {
  const size_t neurons = 300, dim = 16, draws = 40;
  Rng rng(3);
  Tensor w(neurons, dim), h(1, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t c = 0; c < dim; ++c) h.at(0, c) = rng.normal();
  lsh::LshSampler sampler({.family = lsh::Dwta{.k = 3}, .tables = 4, .negatives = draws}, dim, neurons, 5);
  std::vector<uint32_t> counts(neurons);
  for (size_t j = 0; j < neurons; ++j) counts[j] = static_cast<uint32_t>(j % 7 == 0 ? 50 : j % 3);
  sampler.set_label_counts(counts);
  sampler.rebuild(w, 0);
  SparseBatch batch;
  const std::vector<uint32_t> label{11};
  batch.add_point(std::vector<uint32_t>{0}, std::vector<float>{1.0f}, label);
  // Any positive values v_j: sum over drawn entries of v_j * exp(offset_j) estimates sum of v_j over
  // the labels outside the exact part of the set, step after step (the exact part is fixed).
  std::vector<double> v(neurons);
  for (size_t j = 0; j < neurons; ++j) v[j] = 0.5 + std::fmod(0.37 * j, 1.0);
  double estimate = 0.0, truth = 0.0;
  const size_t steps = 4000;
  ActiveTensors sets;  // the host backend's: host tensors
  for (size_t step = 1; step <= steps; ++step) {
    sampler.sample(h, &batch, 0, step, sets);
    const ActiveView active = sets.host();
    REQUIRE(active.logit_offsets.size() == active.ids.size());
    REQUIRE(active.ids[0] == 11);
    REQUIRE(active.logit_offsets[0] == 0.0f);
    std::vector<uint8_t> in_set(neurons, 0);
    size_t exact = 0;
    for (size_t e = 0; e < active.ids.size(); ++e) {
      REQUIRE(in_set[active.ids[e]] == 0);  // no label twice
      in_set[active.ids[e]] = 1;
      if (active.logit_offsets[e] == 0.0f) ++exact; else break;
    }
    // The exact entries (label, LSH hits) come first; everything after them was drawn.
    for (size_t e = exact; e < active.ids.size(); ++e) estimate += v[active.ids[e]] * std::exp(active.logit_offsets[e]);
    std::vector<uint8_t> exact_part(neurons, 0);
    for (size_t e = 0; e < exact; ++e) exact_part[active.ids[e]] = 1;
    for (size_t j = 0; j < neurons; ++j) truth += exact_part[j] ? 0.0 : v[j];
  }
  CHECK(estimate / truth == Approx(1.0).margin(0.03));
  // Without labels (evaluation, inference) nothing is drawn.
  sampler.sample(h, nullptr, 0, 1, sets);
  CHECK(sets.logit_offsets.empty());
}
