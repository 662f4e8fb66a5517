// float <-> IEEE half (f16) and bfloat16 conversions with round-to-nearest-even, in portable code
// (no F16C/AVX-512 requirement: the codec must run on any node of a cheap cluster).
#pragma once

#include <bit>
#include <cstdint>

namespace frugal::comm {

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < half the smallest subnormal
    const uint32_t mant = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 113 - static_cast<int>(abs >> 23) + 13;  // 14..24
    const uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    const uint32_t r = half + ((rem > mid || (rem == mid && (half & 1))) ? 1 : 0);
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t rebiased = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t r = (rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13;
  return static_cast<uint16_t>(sign | r);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace frugal::comm
