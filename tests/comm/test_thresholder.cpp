// DCT-DP thresholding: the sampled threshold agrees with exact selection on several distributions;
// error feedback conserves every entry exactly; keep = 1 sends the gradient unchanged; tau is
// re-estimated only on schedule.
#include <catch2/catch.hpp>
#include <cmath>

#include "comm/thresholder.h"
#include "core/rng.h"

using namespace frugal;

namespace {
std::vector<float> draw(const std::string& kind, size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) {
    if (kind == "normal") x = rng.normal();
    else if (kind == "uniform") x = rng.uniform(-1.0f, 1.0f);
    else if (kind == "laplace") x = (rng.uniform() < 0.5f ? -1.0f : 1.0f) * -std::log(1.0f - rng.uniform());
    else x = std::exp(2.0f * rng.normal()) * (rng.uniform() < 0.5f ? -1.0f : 1.0f);  // log-normal: heavy tail
  }
  return v;
}
}  // namespace

TEST_CASE("threshold: sampled tau (10k samples) is within 25% (keep 1%) / 10% (keep 10%) of the exact percentile") {
  // Tolerances sized for the heavy-tailed log-normal, where a quantile estimate from 10k samples
  // has a relative standard error of ~8% at the 99th percentile and ~3.5% at the 90th.

  Rng rng(3);
  for (const std::string kind : {"normal", "uniform", "laplace", "lognormal"}) {
    const auto v = draw(kind, 1 << 20, rng);
    for (const auto& [keep, tolerance] : std::vector<std::pair<float, double>>{{0.01f, 0.25}, {0.1f, 0.10}}) {
      const float exact = comm::exact_threshold(v, keep);
      const float sampled = comm::sampled_threshold(v, keep, 10000, rng);
      INFO(kind << " keep " << keep << ": exact " << exact << ", sampled " << sampled);
      REQUIRE(std::abs(sampled - exact) <= tolerance * exact);
      // The exact threshold really keeps that fraction.
      const auto kept = std::count_if(v.begin(), v.end(), [&](float x) { return std::abs(x) >= exact; });
      REQUIRE(kept == static_cast<long>(std::ceil(keep * v.size())));
    }
  }
}

TEST_CASE("threshold: error feedback conserves mass exactly; the sent fraction follows keep") {
  Rng rng(5);
  const size_t n = 5000;
  comm::Thresholder t({.keep = 0.05f, .reestimate_every = 4, .exact = true}, n);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<double> total_gradient(n, 0.0), total_sent(n, 0.0);
  for (int step = 0; step < 12; ++step) {
    const auto g = draw("normal", n, rng);
    const std::vector<float> before(t.residual().begin(), t.residual().end());
    t.compress(g, idx, val);
    REQUIRE(std::is_sorted(idx.begin(), idx.end()));
    std::vector<float> sent(n, 0.0f);
    for (size_t j = 0; j < idx.size(); ++j) sent[idx[j]] = val[j];
    for (size_t i = 0; i < n; ++i) {
      // The identity is exact in float: an entry is either sent whole or kept whole.
      REQUIRE(sent[i] + t.residual()[i] == before[i] + g[i]);
      total_gradient[i] += g[i];
      total_sent[i] += sent[i];
    }
    if (step % 4 == 0) REQUIRE(idx.size() == static_cast<size_t>(std::ceil(0.05 * n)));
  }
  for (size_t i = 0; i < n; ++i) REQUIRE(total_sent[i] + t.residual()[i] == Approx(total_gradient[i]).margin(1e-4));
}

TEST_CASE("threshold: keep = 1 sends the gradient unchanged; tau is stale between estimates") {
  Rng rng(7);
  comm::Thresholder all({.keep = 1.0f, .reestimate_every = 1, .exact = true}, 100);
  const auto g = draw("normal", 100, rng);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  all.compress(g, idx, val);
  REQUIRE(idx.size() == 100);
  for (size_t i = 0; i < 100; ++i) REQUIRE(val[i] == g[i]);
  for (const float r : all.residual()) REQUIRE(r == 0.0f);

  comm::Thresholder stale({.keep = 0.1f, .reestimate_every = 3, .sample_size = 500}, 1000);
  std::vector<float> taus;
  for (int s = 0; s < 7; ++s) {
    stale.compress(draw("normal", 1000, rng), idx, val);
    taus.push_back(stale.tau());
  }
  REQUIRE(taus[1] == taus[0]);
  REQUIRE(taus[2] == taus[0]);
  REQUIRE(taus[3] != taus[0]);
  REQUIRE(taus[4] == taus[3]);
  REQUIRE_THROWS(comm::ThresholdOptions{.keep = 0.0f}.validate());
}
