// Scaled int8 rows (comm/dct/scaled_int8.h), DCT-MP's one-byte wire values: the bound on the
// rounding error, stochastic rounding's lack of bias, the edge rows (empty, zero, NaN), and that the
// general vector codec refuses i8 (it has no row to scale by).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "comm/codec.h"
#include "comm/dct/scaled_int8.h"
#include "comm/half.h"
#include "core/rng.h"

using namespace frugal;
using namespace frugal::comm;

namespace {
std::vector<float> round_trip(const std::vector<float>& row, uint32_t key = 0) {
  std::vector<std::byte> bytes(scaled_i8_bytes(row.size()));
  write_scaled_i8(row, bytes.data(), key);
  std::vector<float> back(row.size());
  read_scaled_i8(bytes.data(), back);
  return back;
}
}  // namespace

TEST_CASE("scaled int8: one byte per value plus a bf16 scale; nearest rounding is within half a step") {
  REQUIRE(scaled_i8_bytes(0) == 0);
  REQUIRE(scaled_i8_bytes(51) == 53);
  Rng rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(37);
    const float spread = std::ldexp(1.0f, trial % 20 - 10);  // 2^-10 .. 2^9
    for (float& v : row) v = (rng.uniform() * 2.0f - 1.0f) * spread;
    const auto back = round_trip(row);
    float peak = 0;
    for (float v : row) peak = std::max(peak, std::abs(v));
    // The scale is the smallest bf16 >= the peak (so nothing clips), at most 2^-7 above it.
    std::vector<std::byte> bytes(scaled_i8_bytes(row.size()));
    write_scaled_i8(row, bytes.data());
    uint16_t scale_bits;
    std::memcpy(&scale_bits, bytes.data(), 2);
    const float scale = bf16_to_float(scale_bits);
    REQUIRE(scale >= peak);
    REQUIRE(scale <= peak * (1.0f + 0x1p-7f));
    for (size_t j = 0; j < row.size(); ++j) {
      INFO("trial " << trial << " value " << row[j] << " decoded " << back[j]);
      REQUIRE(std::abs(back[j] - row[j]) <= scale / 254.0f * 1.0001f);
    }
  }
}

TEST_CASE("scaled int8: stochastic rounding is unbiased, reproducible per key, and within one step") {
  const std::vector<float> row{1.0f, 0.3f, -0.0041f, 0.0013f, -0.5f};  // 0.0013 is 1/6 of a step of 1/127
  std::vector<double> sums(row.size(), 0.0);
  constexpr int kKeys = 20000;
  for (uint32_t key = 1; key <= kKeys; ++key) {
    const auto back = round_trip(row, key);
    for (size_t j = 0; j < row.size(); ++j) {
      REQUIRE(std::abs(back[j] - row[j]) <= 1.0f / 127.0f * 1.0001f);
      sums[j] += back[j];
    }
  }
  for (size_t j = 0; j < row.size(); ++j) {
    INFO("value " << row[j] << " mean " << sums[j] / kKeys);
    REQUIRE(sums[j] / kKeys == Approx(row[j]).margin(2e-4));  // a few standard errors of 1/127 / sqrt(kKeys)
  }
  std::vector<float> halves(64, 0.5f / 127.0f);  // half a step each: 0 or one step, a coin per value
  halves[0] = 1.0f;
  REQUIRE(round_trip(halves, 77) == round_trip(halves, 77));
  REQUIRE(round_trip(halves, 77) != round_trip(halves, 78));
  // Nearest rounding flushes what is below half a step; stochastic keeps its mean (checked above).
  REQUIRE(round_trip(row)[3] == 0.0f);
}

TEST_CASE("scaled int8: zero, empty and diverged rows") {
  REQUIRE(round_trip({0.0f, 0.0f, -0.0f}) == std::vector<float>{0.0f, 0.0f, 0.0f});
  REQUIRE(round_trip({}).empty());
  // A NaN anywhere in the row: the row decodes as NaN, visibly diverged rather than quietly finite.
  for (const float v : round_trip({1.0f, std::nanf(""), 2.0f})) REQUIRE(std::isnan(v));
  // An infinite activation: no crash, the row is not finite.
  const auto inf = round_trip({1.0f, std::numeric_limits<float>::infinity()});
  REQUIRE_FALSE(std::isfinite(inf[0] + inf[1]));
  // Any bytes decode without failing (the exchange checks lengths).
  std::vector<std::byte> junk(6, std::byte{0x80});
  std::vector<float> out(4);
  read_scaled_i8(junk.data(), out);
}

TEST_CASE("scaled int8: the vector codec refuses i8 values (they need a row's scale)") {
  const std::vector<float> v{1.0f, 2.0f};
  const std::vector<uint32_t> idx{0, 1};
  REQUIRE_THROWS_WITH(encode_dense(v, ValueType::i8), Catch::Contains("scale"));
  REQUIRE_THROWS_WITH(encode_sparse(4, idx, v, ValueType::i8), Catch::Contains("i8"));
  REQUIRE_THROWS_WITH(encode_auto(v, ValueType::i8), Catch::Contains("i8"));
  REQUIRE(to_string(ValueType::i8) == "i8");
  REQUIRE(value_bytes(ValueType::i8) == 1);
}
