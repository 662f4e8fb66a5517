// DCT-DP thresholding: the sampled threshold agrees with exact selection on several distributions;
// error feedback conserves every entry exactly; keep = 1 sends the gradient unchanged; tau is
// re-estimated only on schedule. The row-sparse form (compress_rows) conserves mass with wire
// rounding, thresholds over the touched rows alone and leaves the others' residual waiting.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "comm/dct/largest.h"
#include "comm/dct/thresholder.h"
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

namespace {
// A row-sparse gradient: `touched` sorted distinct rows of `total_rows`, rows.size() x cols values.
struct RowGradient {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};
RowGradient draw_rows(size_t total_rows, size_t touched, size_t cols, Rng& rng, float scale = 1.0f) {
  RowGradient g;
  std::vector<uint32_t> all(total_rows);
  for (size_t i = 0; i < total_rows; ++i) all[i] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < touched; ++i) std::swap(all[i], all[i + rng.below(total_rows - i)]);
  g.rows.assign(all.begin(), all.begin() + touched);
  std::sort(g.rows.begin(), g.rows.end());
  g.values.resize(touched * cols);
  for (float& x : g.values) x = scale * rng.normal();
  return g;
}
// 30 touched rows of very different scales (even positions 1e3, odd 1e-3): one tau picks only the
// loud rows.
RowGradient loud_and_quiet_rows(size_t total_rows, size_t cols, Rng& rng) {
  RowGradient g = draw_rows(total_rows, 30, cols, rng);
  for (size_t k = 0; k < g.rows.size(); ++k)
    for (size_t c = 0; c < cols; ++c) g.values[k * cols + c] *= k % 2 == 0 ? 1e3f : 1e-3f;
  return g;
}
// The residual plus the gradient: what a compress_rows call selects from.
std::vector<float> accumulated(const comm::Thresholder& t, const RowGradient& g, size_t cols) {
  std::vector<float> acc(t.residual().begin(), t.residual().end());
  for (size_t k = 0; k < g.rows.size(); ++k)
    for (size_t c = 0; c < cols; ++c) acc[g.rows[k] * cols + c] += g.values[k * cols + c];
  return acc;
}
}  // namespace

TEST_CASE("threshold rows: mass is conserved exactly, wire rounding included; nothing sent is zero") {
  const size_t rows = 300, cols = 16;
  for (const auto wire : {comm::ValueType::f32, comm::ValueType::f16, comm::ValueType::bf16}) {
    Rng rng(11);
    comm::Thresholder t({.keep = 0.1f, .reestimate_every = 3, .sample_size = 2000}, rows * cols);
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (int step = 0; step < 10; ++step) {
      // Some rows carry values far beyond f16's range or below its subnormals.
      const auto g = draw_rows(rows, 40, cols, rng, step == 4 ? 1e5f : (step == 5 ? 1e-8f : 1.0f));
      const std::vector<float> before(t.residual().begin(), t.residual().end());
      std::vector<float> acc = before;
      for (size_t k = 0; k < g.rows.size(); ++k)
        for (size_t c = 0; c < cols; ++c) acc[g.rows[k] * cols + c] += g.values[k * cols + c];
      t.compress_rows(cols, g.rows, g.values.data(), wire, idx, val);
      REQUIRE(std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end());
      std::vector<float> sent(rows * cols, 0.0f);
      for (size_t j = 0; j < idx.size(); ++j) {
        INFO("wire " << static_cast<int>(wire) << " step " << step);
        REQUIRE(val[j] != 0.0f);
        REQUIRE(std::isfinite(val[j]));
        REQUIRE(comm::round_to_wire(val[j], wire) == val[j]);  // already what the wire carries
        REQUIRE(std::binary_search(g.rows.begin(), g.rows.end(), idx[j] / cols));  // candidates only
        sent[idx[j]] = val[j];
      }
      for (size_t i = 0; i < rows * cols; ++i) {
        INFO("wire " << static_cast<int>(wire) << " step " << step << " entry " << i);
        REQUIRE(sent[i] + t.residual()[i] == acc[i]);  // exact, entry by entry
      }
    }
  }
  // Overflowing f16 sends its largest finite value and keeps the excess.
  REQUIRE(comm::round_to_wire(70000.0f, comm::ValueType::f16) == 65504.0f);
  REQUIRE(comm::round_to_wire(-70000.0f, comm::ValueType::f16) == -65504.0f);
}

TEST_CASE("threshold rows: sign sends +-(mean magnitude of the selection) and keeps the difference") {
  const size_t rows = 200, cols = 8;
  Rng rng(5);
  comm::Thresholder t({.keep = 0.05f, .reestimate_every = 1, .exact = true}, rows * cols);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (int step = 0; step < 6; ++step) {
    const auto g = draw_rows(rows, 30, cols, rng, 1.0f);
    std::vector<float> acc(t.residual().begin(), t.residual().end());
    for (size_t k = 0; k < g.rows.size(); ++k)
      for (size_t c = 0; c < cols; ++c) acc[g.rows[k] * cols + c] += g.values[k * cols + c];
    t.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::sign, idx, val);
    INFO("step " << step);
    REQUIRE(!idx.empty());
    double mean = 0.0;
    for (const uint32_t i : idx) mean += std::abs(acc[i]);
    mean /= static_cast<double>(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
      REQUIRE(std::abs(acc[idx[j]]) >= t.tau());            // selected by the threshold
      REQUIRE(val[j] == std::copysign(static_cast<float>(mean), acc[idx[j]]));
      REQUIRE(t.residual()[idx[j]] == acc[idx[j]] - val[j]);  // the rest waits in the residual
    }
    std::vector<bool> sent(rows * cols, false);
    for (const uint32_t i : idx) sent[i] = true;
    for (size_t i = 0; i < rows * cols; ++i)
      if (!sent[i]) REQUIRE(t.residual()[i] == acc[i]);
  }
}

TEST_CASE("threshold: the warm-up keeps a fraction that falls geometrically from everything to keep") {
  const comm::ThresholdOptions o{.keep = 0.01f, .reestimate_every = 1000, .exact = true, .warmup_steps = 100};
  REQUIRE(o.keep_at(0) == 1.0f);
  REQUIRE(std::abs(o.keep_at(50) - 0.1f) < 1e-6f);
  REQUIRE(o.keep_at(100) == 0.01f);
  REQUIRE(o.keep_at(5000) == 0.01f);
  // During the warm-up tau follows the schedule every step although reestimate_every is 1000.
  const size_t rows = 100, cols = 10;
  comm::Thresholder t(o, rows * cols);
  std::vector<uint32_t> all(rows), idx;
  for (uint32_t r = 0; r < rows; ++r) all[r] = r;
  std::vector<float> val;
  Rng rng(9);
  for (uint64_t step = 0; step <= 100; step += 1) {
    std::vector<float> g(rows * cols);
    for (float& x : g) x = rng.normal();
    t.compress_rows(cols, all, g.data(), comm::ValueType::f32, idx, val);
    if (step == 0) REQUIRE(idx.size() == rows * cols);
    if (step == 50) REQUIRE(idx.size() == 100);  // exact top-10% of 1000 entries
    if (step == 100) REQUIRE(idx.size() == 10);
  }
}

TEST_CASE("threshold rows: keep = 1 sends every candidate entry, zeros included, and keeps nothing (f32)") {
  Rng rng(13);
  const size_t rows = 50, cols = 8;
  comm::Thresholder t({.keep = 1.0f, .reestimate_every = 1, .exact = true}, rows * cols);
  auto g = draw_rows(rows, 10, cols, rng);
  for (size_t k = 0; k < g.values.size(); k += 3) g.values[k] = 0.0f;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  t.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::f32, idx, val);
  REQUIRE(idx.size() == g.values.size());
  for (size_t k = 0; k < g.rows.size(); ++k)
    for (size_t c = 0; c < cols; ++c) {
      REQUIRE(idx[k * cols + c] == g.rows[k] * cols + c);
      REQUIRE(val[k * cols + c] == g.values[k * cols + c]);
    }
  for (const float r : t.residual()) REQUIRE(r == 0.0f);

  // bf16 keep = 1: every candidate still goes out; the rounding error waits for the row's next turn.
  comm::Thresholder b({.keep = 1.0f}, rows * cols);
  b.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::bf16, idx, val);
  REQUIRE(idx.size() == g.values.size());
  for (size_t j = 0; j < idx.size(); ++j) REQUIRE(val[j] + b.residual()[idx[j]] == g.values[j]);
}

TEST_CASE("threshold rows: untouched rows keep their residual; tau comes from the candidates alone") {
  Rng rng(17);
  const size_t rows = 400, cols = 32;
  comm::Thresholder t({.keep = 0.05f, .reestimate_every = 1, .exact = true}, rows * cols);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  // Step 1: rows 0..99 with huge values; most stay behind in the residual.
  std::vector<uint32_t> big_rows(100);
  for (uint32_t r = 0; r < 100; ++r) big_rows[r] = r;
  std::vector<float> big(100 * cols);
  for (float& x : big) x = 1000.0f * rng.normal();
  t.compress_rows(cols, big_rows, big.data(), comm::ValueType::f32, idx, val);
  REQUIRE(t.tau() == comm::exact_threshold(big, 0.05f));
  const std::vector<float> left(t.residual().begin(), t.residual().end());
  // Step 2: other rows with small values. tau is their percentile, not the big residual's, and
  // rows 0..99 are neither sent nor changed.
  const auto small = draw_rows(300, 60, cols, rng);
  std::vector<uint32_t> small_rows = small.rows;
  for (auto& r : small_rows) r += 100;
  t.compress_rows(cols, small_rows, small.values.data(), comm::ValueType::f32, idx, val);
  REQUIRE(t.tau() == comm::exact_threshold(small.values, 0.05f));
  REQUIRE(idx.size() == static_cast<size_t>(std::ceil(0.05 * small.values.size())));
  for (const uint32_t i : idx) REQUIRE(i >= 100 * cols);
  for (size_t i = 0; i < 100 * cols; ++i) REQUIRE(t.residual()[i] == left[i]);

  // A step with no candidates neither sends nor consumes the estimate: the next step estimates.
  comm::Thresholder e({.keep = 0.05f, .reestimate_every = 1000, .exact = true}, rows * cols);
  e.compress_rows(cols, {}, nullptr, comm::ValueType::f32, idx, val);
  REQUIRE(idx.empty());
  e.compress_rows(cols, small_rows, small.values.data(), comm::ValueType::f32, idx, val);
  REQUIRE(e.tau() == comm::exact_threshold(small.values, 0.05f));

  REQUIRE_THROWS(t.compress_rows(cols, std::vector<uint32_t>{5, 5}, big.data(), comm::ValueType::f32, idx, val));
  REQUIRE_THROWS(t.compress_rows(cols, std::vector<uint32_t>{400}, big.data(), comm::ValueType::f32, idx, val));
}

TEST_CASE("threshold rows: sampled tau over the candidates agrees with the exact one") {
  Rng rng(19);
  const size_t rows = 20000, cols = 64;
  const auto g = draw_rows(rows, 800, cols, rng);  // 51200 candidates in a 1.28M-entry parameter
  for (const auto& [keep, tolerance] : std::vector<std::pair<float, double>>{{0.01f, 0.1}, {0.1f, 0.05}}) {
    comm::Thresholder exact({.keep = keep, .exact = true}, rows * cols);
    comm::Thresholder sampled({.keep = keep, .sample_size = 10000, .seed = 3}, rows * cols);
    std::vector<uint32_t> idx;
    std::vector<float> val;
    exact.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::f32, idx, val);
    REQUIRE(idx.size() == static_cast<size_t>(std::ceil(keep * g.values.size())));
    sampled.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::f32, idx, val);
    INFO("keep " << keep << ": exact " << exact.tau() << ", sampled " << sampled.tau());
    REQUIRE(exact.tau() == comm::exact_threshold(g.values, keep));
    REQUIRE(std::abs(sampled.tau() - exact.tau()) <= tolerance * exact.tau());
    REQUIRE(std::abs(static_cast<double>(idx.size()) / g.values.size() - keep) <= 0.3 * keep);
  }
}

TEST_CASE("threshold rows, per-row selection: each touched row sends its own top ceil(keep * cols); mass is conserved") {
  const size_t rows = 200, cols = 20;
  Rng rng(5);
  comm::Thresholder t({.keep = 0.1f, .per_row = true}, rows * cols);  // 2 of 20 columns per touched row
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (int step = 0; step < 6; ++step) {
    // Rows of very different scales: a global tau would send only the loud rows.
    const auto g = loud_and_quiet_rows(rows, cols, rng);
    const std::vector<float> acc = accumulated(t, g, cols);
    t.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::bf16, idx, val);
    REQUIRE(std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end());
    for (const uint32_t row : g.rows) {  // quiet rows send as many entries as loud ones
      const auto n = std::count_if(idx.begin(), idx.end(), [&](uint32_t i) { return i / cols == row; });
      INFO("step " << step << " row " << row);
      REQUIRE(n == 2);
      // ... and they are the row's two largest magnitudes of what had accumulated.
      std::vector<float> mags;
      for (size_t c = 0; c < cols; ++c) mags.push_back(std::abs(acc[row * cols + c]));
      std::sort(mags.rbegin(), mags.rend());
      for (size_t j = 0; j < idx.size(); ++j)
        if (idx[j] / cols == row) REQUIRE(std::abs(acc[idx[j]]) >= mags[1]);
    }
    std::vector<float> sent(rows * cols, 0.0f);
    for (size_t j = 0; j < idx.size(); ++j) sent[idx[j]] = val[j];
    for (size_t i = 0; i < rows * cols; ++i) REQUIRE(sent[i] + t.residual()[i] == acc[i]);
  }
  // Sign values share one scale over the whole selection: refused with per-row selection.
  REQUIRE_THROWS_WITH((comm::DpCompression{.keep = 0.1f, .wire = comm::ValueType::sign, .per_row = true}.validate()),
                      Catch::Contains("per-row"));
}

TEST_CASE("threshold rows, row floor: one tau, and a touched row with nothing above it sends its largest") {
  const size_t rows = 200, cols = 20;
  Rng rng(6);
  comm::Thresholder t({.keep = 0.1f, .exact = true, .row_floor = true}, rows * cols);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (int step = 0; step < 6; ++step) {
    const auto g = loud_and_quiet_rows(rows, cols, rng);  // loud rows take the global selection
    const std::vector<float> acc = accumulated(t, g, cols);
    t.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::bf16, idx, val);
    REQUIRE(std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end());
    size_t floors = 0;
    for (const uint32_t row : g.rows) {
      std::vector<uint32_t> of_row;
      for (const uint32_t i : idx)
        if (i / cols == row) of_row.push_back(i);
      INFO("step " << step << " row " << row);
      REQUIRE(!of_row.empty());  // every touched row moves
      const bool above = std::any_of(of_row.begin(), of_row.end(), [&](uint32_t i) { return std::abs(acc[i]) >= t.tau(); });
      if (above) continue;
      // A row below tau sends exactly one entry, its largest.
      ++floors;
      REQUIRE(of_row.size() == 1);
      for (size_t c = 0; c < cols; ++c) REQUIRE(std::abs(acc[row * cols + c]) <= std::abs(acc[of_row[0]]));
    }
    REQUIRE(floors > 0);  // the quiet rows took the floor
    std::vector<float> sent(rows * cols, 0.0f);
    for (size_t j = 0; j < idx.size(); ++j) sent[idx[j]] = val[j];
    for (size_t i = 0; i < rows * cols; ++i) REQUIRE(sent[i] + t.residual()[i] == acc[i]);
  }
  // Without the floor the quiet rows wait in the residual.
  comm::Thresholder plain({.keep = 0.1f, .exact = true}, rows * cols);
  const auto g = loud_and_quiet_rows(rows, cols, rng);
  plain.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::bf16, idx, val);
  REQUIRE(std::none_of(idx.begin(), idx.end(), [&](uint32_t i) { return i / cols == g.rows[1]; }));
}

TEST_CASE("threshold rows, momentum correction: the residual accumulates a velocity that restarts where sent") {
  // Row 0 (2 columns): column 0 is large and sent every step, column 1 small and held back.
  // Row 1 is touched at steps 0 and 2 only: its velocity waits in between (lazy, like lazy Adam).
  comm::Thresholder t({.keep = 0.25f, .exact = true, .momentum = 0.5f, .momentum_scale = 2.0f}, 4);
  std::vector<uint32_t> indices;
  std::vector<float> sent;
  double u1 = 0, r1 = 0, u3 = 0, r3 = 0;  // velocity and residual of flat entries 1 and 3
  const float grads[3][4] = {{8.0f, 0.5f, 0.0f, 0.25f}, {16.0f, 0.25f, 0, 0}, {4.0f, 1.0f, 0.0f, 0.5f}};
  for (int step = 0; step < 3; ++step) {
    const std::vector<uint32_t> rows = step == 1 ? std::vector<uint32_t>{0} : std::vector<uint32_t>{0, 1};
    std::vector<float> values(grads[step], grads[step] + 2 * rows.size());
    t.compress_rows(2, rows, values.data(), comm::ValueType::f32, indices, sent);
    // Column 0's velocity restarted at 0 after every send: what it sends is just 2 g.
    REQUIRE(indices == std::vector<uint32_t>{0});
    REQUIRE(sent == std::vector<float>{2.0f * grads[step][0]});
    REQUIRE(t.velocity()[0] == 0.0f);
    u1 = 0.5 * u1 + 2.0 * grads[step][1];
    r1 += u1;
    if (step != 1) {
      u3 = 0.5 * u3 + 2.0 * grads[step][3];
      r3 += u3;
    }
    REQUIRE(t.velocity()[1] == Approx(u1));
    REQUIRE(t.residual()[1] == Approx(r1));
    REQUIRE(t.velocity()[3] == Approx(u3));
    REQUIRE(t.residual()[3] == Approx(r3));
  }
  REQUIRE(t.state().velocity.size() == 4);
  // A state saved without a velocity (momentum correction turned on at a resume) restores zeros.
  comm::ThresholderState old = t.state();
  old.velocity.clear();
  t.restore(old);
  REQUIRE(t.velocity()[1] == 0.0f);
  REQUIRE(t.residual()[1] == Approx(r1));
  comm::ThresholderState wrong = t.state();
  wrong.velocity.resize(3);
  REQUIRE_THROWS_WITH(t.restore(wrong), Catch::Contains("velocity of 3 entries"));
}

TEST_CASE("next_magnitude_above finds what the scalar loop finds: NaNs, infinities, signed zeros, any start") {
  Rng rng(29);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 1.0f, -1.0f};
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = rng.below(70);
    std::vector<float> v(n);
    for (float& x : v) x = rng.below(4) == 0 ? specials[rng.below(7)] : static_cast<float>(rng.normal());
    const float t = trial % 3 == 0 ? 1.0f : (trial % 3 == 1 ? 0.0f : static_cast<float>(rng.uniform(0, 2)));
    const size_t from = rng.below(n + 2);
    for (const bool or_equal : {false, true}) {
      INFO("n " << n << " from " << from << " t " << t << " or_equal " << or_equal);
      REQUIRE(comm::next_magnitude_above(v.data(), from, n, t, or_equal) ==
              comm::next_magnitude_above_scalar(v.data(), from, n, t, or_equal));
    }
  }
}

TEST_CASE("largest_ascending picks partition_largest's set (ties to the lower position), in ascending order") {
  Rng rng(17);
  std::vector<uint32_t> fast, slow;
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t n = 1 + rng.below(300), k = rng.below(n + 2);
    std::vector<float> v(n);
    // Few distinct magnitudes of both signs, so ties are common; zeros too.
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.below(7)) - 3) * (trial % 2 == 0 ? 1.0f : 0.25f);
    comm::largest_ascending(v.data(), n, k, fast);
    const size_t kk = std::min(k, n);
    if (kk > 0) {
      comm::partition_largest(v.data(), n, kk, slow);
      slow.resize(kk);
      std::sort(slow.begin(), slow.end());
    } else {
      slow.clear();
    }
    INFO("n " << n << " k " << k);
    REQUIRE(fast == slow);
  }
  // Rows of distinct normal values, the widths DCT-DP meets (128-column rows, k up to 32: the
  // block-maximum pass), and a row whose largest entries all sit in one block.
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = 64 + rng.below(200), k = 1 + rng.below(trial % 2 == 0 ? 32 : n);
    std::vector<float> v(n);
    for (float& x : v) x = rng.normal();
    if (trial % 5 == 0)
      for (size_t j = 0; j < std::min<size_t>(8, n); ++j) v[j] = 100.0f + static_cast<float>(j);
    // The bitwise search's edges: subnormals, the largest finite value, infinities, signed zeros.
    if (trial % 7 == 0) {
      v[rng.below(n)] = std::numeric_limits<float>::denorm_min();
      v[rng.below(n)] = -std::numeric_limits<float>::max();
      v[rng.below(n)] = std::numeric_limits<float>::infinity();
      v[rng.below(n)] = -0.0f;
    }
    comm::largest_ascending(v.data(), n, k, fast);
    comm::partition_largest(v.data(), n, std::min(k, n), slow);
    slow.resize(std::min(k, n));
    std::sort(slow.begin(), slow.end());
    INFO("normal values, n " << n << " k " << k);
    REQUIRE(fast == slow);
  }
}

TEST_CASE("kth_largest_magnitude leaves a NaN out, whatever k selects the path") {
  Rng rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 40 + rng.below(100), k = 1 + rng.below(32);
    std::vector<float> v(n);
    for (float& x : v) x = rng.normal();
    v[rng.below(n)] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> m;
    for (const float x : v)
      if (!std::isnan(x)) m.push_back(std::abs(x));
    std::sort(m.begin(), m.end(), std::greater<float>());
    const auto [kth, above] = comm::kth_largest_magnitude(v.data(), n, k);
    INFO("n " << n << " k " << k);
    REQUIRE(kth == m[k - 1]);
    REQUIRE(above == static_cast<size_t>(std::count_if(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(k),
                                                       [&](float x) { return x > m[k - 1]; })));
  }
}

// --compress auto's controller (ThresholdOptions::auto_energy): the kept fraction starts at
// everything and falls while what is sent carries the target share of the accumulated energy; a
// gradient whose energy sits in few entries ends far lower than one spread evenly; when the
// gradients change so that the share drops, it backs off (rises); never below its floor; mass is
// conserved throughout, and the controller's state survives a save and restore.
TEST_CASE("threshold rows, automatic keep: falls to what the energy target allows, backs off, respects its floor") {
  const size_t rows = 200, cols = 16;
  std::vector<uint32_t> all(rows);
  for (uint32_t r = 0; r < rows; ++r) all[r] = r;
  const auto run = [&](comm::Thresholder& t, const std::string& kind, int steps, Rng& rng) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (int s = 0; s < steps; ++s) {
      const std::vector<float> g = draw(kind, rows * cols, rng);
      t.compress_rows(cols, all, g.data(), comm::ValueType::f32, idx, val);
      REQUIRE(t.keep() >= 0.001f);
      REQUIRE(t.keep() <= 1.0f);
    }
  };
  const comm::ThresholdOptions o{.keep = 0.001f, .exact = true, .auto_energy = 0.5f};
  comm::Thresholder heavy(o, rows * cols), flat(o, rows * cols);
  CHECK(heavy.keep() == 1.0f);
  Rng rng(21);
  run(heavy, "lognormal", 300, rng);
  run(flat, "uniform", 300, rng);
  INFO("heavy-tailed keep " << heavy.keep() << ", uniform keep " << flat.keep());
  CHECK(heavy.keep() < 0.1f);                 // a few entries carry half the energy
  CHECK(flat.keep() > 2.0f * heavy.keep());   // spread evenly: many more are needed
  CHECK(heavy.carried_energy() > 0.3);        // held near the target
  CHECK(flat.carried_energy() > 0.3);
  // A floor above what the energy would allow holds.
  comm::Thresholder floored({.keep = 0.2f, .exact = true, .auto_energy = 0.5f}, rows * cols);
  run(floored, "lognormal", 200, rng);
  CHECK(floored.keep() == Approx(0.2f));
  // The gradients change: the heavy-tailed keep no longer carries the share, so it backs off.
  const uint64_t before = heavy.backoffs();
  const float low = heavy.keep();
  run(heavy, "uniform", 100, rng);
  CHECK(heavy.backoffs() > before);
  CHECK(heavy.keep() > low);
  // Save and restore: the copy continues exactly as the original.
  comm::Thresholder copy(o, rows * cols);
  copy.restore(heavy.state());
  CHECK(copy.keep() == heavy.keep());
  CHECK(copy.backoffs() == heavy.backoffs());
  std::vector<uint32_t> ia, ib;
  std::vector<float> va, vb;
  const std::vector<float> g = draw("laplace", rows * cols, rng);
  heavy.compress_rows(cols, all, g.data(), comm::ValueType::f32, ia, va);
  copy.compress_rows(cols, all, g.data(), comm::ValueType::f32, ib, vb);
  CHECK(ia == ib);
  CHECK(va == vb);
  CHECK(copy.keep() == heavy.keep());
}

TEST_CASE("threshold rows, automatic keep: error feedback conserves mass; per-row selection adapts too") {
  const size_t rows = 50, cols = 8;
  std::vector<uint32_t> all(rows);
  for (uint32_t r = 0; r < rows; ++r) all[r] = r;
  for (const bool per_row : {false, true}) {
    INFO("per-row " << per_row);
    comm::Thresholder t({.keep = 0.01f, .exact = true, .per_row = per_row, .auto_energy = 0.6f}, rows * cols);
    Rng rng(5);
    std::vector<double> fed(rows * cols, 0.0), sent(rows * cols, 0.0);
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (int s = 0; s < 200; ++s) {
      const std::vector<float> g = draw("lognormal", rows * cols, rng);
      for (size_t i = 0; i < g.size(); ++i) fed[i] += g[i];
      t.compress_rows(cols, all, g.data(), comm::ValueType::bf16, idx, val);
      for (size_t j = 0; j < idx.size(); ++j) sent[idx[j]] += val[j];
    }
    CHECK(t.keep() < 1.0f);
    const std::span<const float> residual = t.residual();
    for (size_t i = 0; i < fed.size(); ++i) REQUIRE(sent[i] + residual[i] == Approx(fed[i]).epsilon(1e-4).margin(1e-3));
  }
}

namespace {
// `plain` takes `t`'s residual: both then select from the same accumulated values.
void follow(comm::Thresholder& plain, const comm::Thresholder& t) {
  comm::ThresholderState s;
  s.residual.assign(t.residual().begin(), t.residual().end());
  plain.restore(s);
}
}  // namespace

TEST_CASE("threshold, exploration: the threshold's selection plus about explore of the rest; mass conserved; 0 is off") {
  const size_t rows = 400, cols = 25, n = rows * cols;
  const float explore = 0.05f;
  // Each selection path: one tau over a dense block, one tau over touched rows (with and without the
  // floor), and per-row top k. Each is checked against the same path without exploration, step by
  // step on the same gradients: exploration only adds entries (the threshold's own still go), about
  // explore of the candidates more, and sent + residual == accumulated exactly.
  for (const int path : {0, 1, 2, 3}) {
    comm::ThresholdOptions base{.keep = 0.02f, .exact = true, .per_row = path == 3, .row_floor = path == 2};
    comm::ThresholdOptions with = base;
    with.explore = explore;
    comm::Thresholder t(with, n), plain(base, n);
    Rng rng(11 + path);
    std::vector<uint32_t> idx, plain_idx;
    std::vector<float> val, plain_val;
    size_t extra = 0, eligible = 0;  // explored entries; non-zero candidates the threshold left
    for (int step = 0; step < 5; ++step) {
      INFO("path " << path << " step " << step);
      const auto g = loud_and_quiet_rows(rows, cols, rng);
      std::vector<float> acc;
      if (path == 0) {
        std::vector<float> dense(n, 0.0f);
        for (size_t r = 0; r < g.rows.size(); ++r)
          for (size_t c = 0; c < cols; ++c) dense[g.rows[r] * cols + c] = g.values[r * cols + c];
        acc.assign(t.residual().begin(), t.residual().end());
        for (size_t i = 0; i < n; ++i) acc[i] += dense[i];
        // The plain thresholder follows the explored one's residual: the same candidates each step.
        follow(plain, t);
        t.compress(dense, idx, val);
        plain.compress(dense, plain_idx, plain_val);
      } else {
        acc = accumulated(t, g, cols);
        follow(plain, t);
        t.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::f32, idx, val);
        plain.compress_rows(cols, g.rows, g.values.data(), comm::ValueType::f32, plain_idx, plain_val);
      }
      // Candidates: every entry (dense), the touched rows' entries (rows); zeros are never sent.
      size_t nonzero = 0;
      if (path == 0) {
        nonzero = static_cast<size_t>(std::count_if(acc.begin(), acc.end(), [](float v) { return v != 0.0f; }));
      } else {
        for (const uint32_t row : g.rows)
          for (size_t c = 0; c < cols; ++c) nonzero += acc[row * cols + c] != 0.0f ? 1 : 0;
      }
      eligible += nonzero - plain_idx.size();
      REQUIRE(std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end());
      // Every entry the threshold alone sends is sent (same tau: exact selection over the same values).
      for (const uint32_t i : plain_idx) REQUIRE(std::binary_search(idx.begin(), idx.end(), i));
      REQUIRE(idx.size() >= plain_idx.size());
      extra += idx.size() - plain_idx.size();
      std::vector<float> sent(n, 0.0f);
      for (size_t j = 0; j < idx.size(); ++j) sent[idx[j]] = val[j];
      for (size_t i = 0; i < n; ++i) REQUIRE(sent[i] + t.residual()[i] == acc[i]);
    }
    // About explore of the rest (binomial, thousands of draws: within 25%; the floor's entries can
    // be among the explored ones, so a floor path may count a few less).
    INFO("path " << path << ": " << extra << " explored of " << eligible << " eligible entries");
    REQUIRE(static_cast<double>(extra) > 0.75 * explore * static_cast<double>(eligible));
    REQUIRE(static_cast<double>(extra) < 1.25 * explore * static_cast<double>(eligible));
  }
  // Values, not signs; the fraction in [0, 1).
  REQUIRE_THROWS_WITH((comm::DpCompression{.keep = 0.1f, .wire = comm::ValueType::sign, .explore = 0.01f}.validate()),
                      Catch::Contains("exploration sends values"));
  REQUIRE_THROWS_WITH((comm::ThresholdOptions{.explore = 1.0f}.validate()), Catch::Contains("exploration fraction"));
}
