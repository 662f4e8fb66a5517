#include "comm/dct/scaled_int8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/half.h"
#include "core/hash32.h"

namespace frugal::comm {

namespace {
// The smallest bf16 >= v for finite v >= 0 (so every |value| / scale <= 1); NaN and infinity as is.
uint16_t bf16_at_least(float v) {
  if (!std::isfinite(v)) return float_to_bf16(v);
  const auto bits = std::bit_cast<uint32_t>(v);
  return static_cast<uint16_t>((bits + 0xffffu) >> 16);
}
}  // namespace

void write_scaled_i8(std::span<const float> values, std::byte* out, uint32_t stochastic_key) {
  if (values.empty()) return;
  float peak = 0.0f;
  bool nan = false;
  for (float v : values) {
    peak = std::max(peak, std::abs(v));
    nan = nan || std::isnan(v);
  }
  if (nan) peak = std::numeric_limits<float>::quiet_NaN();  // a diverged row stays visibly diverged
  const uint16_t scale_bits = bf16_at_least(peak);
  std::memcpy(out, &scale_bits, 2);
  const float scale = bf16_to_float(scale_bits);
  const float to_q = scale > 0.0f && std::isfinite(scale) ? 127.0f / scale : 0.0f;
  for (size_t j = 0; j < values.size(); ++j) {
    const float x = values[j] * to_q;
    float q;
    if (stochastic_key == 0) {
      q = std::nearbyint(x);
    } else {  // floor(x + u), u uniform in [0, 1): E[q] = x
      const uint32_t bits = lowbias32(stochastic_key ^ lowbias32(static_cast<uint32_t>(j) + 0x9e3779b9u));
      q = std::floor(x + static_cast<float>(bits >> 8) * 0x1p-24f);
    }
    q = std::isfinite(q) ? std::clamp(q, -127.0f, 127.0f) : 0.0f;
    out[2 + j] = static_cast<std::byte>(static_cast<int8_t>(q));
  }
}

void read_scaled_i8(const std::byte* in, std::span<float> values) {
  if (values.empty()) return;
  uint16_t scale_bits;
  std::memcpy(&scale_bits, in, 2);
  const float step = bf16_to_float(scale_bits) / 127.0f;
  for (size_t j = 0; j < values.size(); ++j) values[j] = static_cast<float>(static_cast<int8_t>(in[2 + j])) * step;
}

}  // namespace frugal::comm
