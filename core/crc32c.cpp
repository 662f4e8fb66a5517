#include "core/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace frugal {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

uint32_t crc_software(const unsigned char* p, size_t n, uint32_t c) {
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c;
}

// GF(2) 32x32 matrices as 32 columns: the operators that advance a CRC register over zero bytes.
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat)
    if (vec & 1) sum ^= *mat;
  return sum;
}
void gf2_square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// A register advanced over `len` zero bytes (len a power of two), as four byte-indexed tables.
struct Shift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  explicit Shift(size_t len) {
    uint32_t odd[32], even[32];
    odd[0] = kPoly;  // one zero bit
    for (int n = 1; n < 32; ++n) odd[n] = uint32_t{1} << (n - 1);
    gf2_square(even, odd);  // two zero bits
    gf2_square(odd, even);  // four
    const uint32_t* op = nullptr;
    for (;;) {  // squares: one zero byte in even, two in odd, ... until len is used up
      gf2_square(even, odd);
      len >>= 1;
      if (len == 0) {
        op = even;
        break;
      }
      gf2_square(odd, even);
      len >>= 1;
      if (len == 0) {
        op = odd;
        break;
      }
    }
    for (uint32_t n = 0; n < 256; ++n)
      for (int k = 0; k < 4; ++k) t[k][n] = gf2_times(op, n << (8 * k));
  }
  uint32_t operator()(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

#if defined(__x86_64__)
// Three streams of `block` bytes (a multiple of 8) while 3 blocks remain; returns the register.
__attribute__((target("sse4.2"))) uint64_t crc_three_way(const unsigned char*& p, size_t& n, uint64_t c0,
                                                           size_t block, const Shift& shift) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < block; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);
      std::memcpy(&v1, p + block + i, 8);
      std::memcpy(&v2, p + 2 * block + i, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c0 = shift(static_cast<uint32_t>(c0)) ^ c1;
    c0 = shift(static_cast<uint32_t>(c0)) ^ c2;
    p += 3 * block;
    n -= 3 * block;
  }
  return c0;
}

__attribute__((target("sse4.2"))) uint32_t crc_hardware(const unsigned char* p, size_t n,
                                                          uint32_t c) {
  constexpr size_t kLong = 8192, kShort = 256;
  static const Shift long_shift(kLong), short_shift(kShort);
  uint64_t c64 = c;
  c64 = crc_three_way(p, n, c64, kLong, long_shift);
  c64 = crc_three_way(p, n, c64, kShort, short_shift);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --n;
  }
  return c32;
}
bool have_sse42() {
  static const bool ok = __builtin_cpu_supports("sse4.2");
  return ok;
}
#endif

}  // namespace

uint32_t crc32c(std::span<const std::byte> data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (have_sse42()) return ~crc_hardware(p, data.size(), c);
#endif
  return ~crc_software(p, data.size(), c);
}

uint32_t crc32c_portable(std::span<const std::byte> data, uint32_t crc) {
  return ~crc_software(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
}

}  // namespace frugal
