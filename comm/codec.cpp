#include "comm/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "comm/half.h"

namespace frugal::comm {
namespace {

void put_varint(std::vector<std::byte>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

size_t varint_bytes(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void put_value(std::vector<std::byte>& out, float v, ValueType type) {
  std::byte b[4];
  write_value(type, v, b);
  out.insert(out.end(), b, b + value_bytes(type));
}

// Bounds-checked reader over untrusted bytes.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  size_t left() const { return b_.size() - at_; }
  size_t offset() const { return at_; }
  uint8_t byte() {
    need(1, "tag");
    return static_cast<uint8_t>(b_[at_++]);
  }
  uint64_t varint(const char* what) {
    // The common case, a 1-byte varint with more bytes after it, without the loop's checks.
    if (at_ < b_.size() && !(static_cast<uint8_t>(b_[at_]) & 0x80)) return static_cast<uint8_t>(b_[at_++]);
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1, what);
      const auto c = static_cast<uint8_t>(b_[at_++]);
      if (shift == 63 && (c & 0x7e)) break;  // more than 64 bits
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    throw CodecError(fmt::format("bad encoded vector: {} varint at byte {} is longer than 64 bits",
                                 what, at_));
  }
  const std::byte* take(size_t n, const char* what) {
    need(n, what);
    const std::byte* p = b_.data() + at_;
    at_ += n;
    return p;
  }

 private:
  void need(size_t n, const char* what) const {
    if (left() < n) {
      throw CodecError(fmt::format("bad encoded vector: truncated at byte {} reading {} ({} bytes "
                                   "needed, {} left)", at_, what, n, left()));
    }
  }
  std::span<const std::byte> b_;
  size_t at_ = 0;
};

// The scale and sign bits of a sign message into `values` (already sized to the entry count).
void read_signs(Reader& r, std::vector<float>& values) {
  const size_t n = values.size(), need = sign_bytes(n);
  if (r.left() != need) {
    throw CodecError(fmt::format("bad encoded vector: {} sign entries need {} bytes, {} present", n, need, r.left()));
  }
  if (n == 0) return;
  float scale;
  std::memcpy(&scale, r.take(4, "sign scale"), 4);
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    throw CodecError(fmt::format("bad encoded vector: sign scale {} is not > 0 and finite", scale));
  }
  const std::byte* bits = r.take(need - 4, "sign bits");
  if (n % 8 != 0 && (static_cast<uint8_t>(bits[n / 8]) >> (n % 8)) != 0) {
    throw CodecError("bad encoded vector: sign bits beyond the last entry are set");
  }
  for (size_t k = 0; k < n; ++k)
    values[k] = (static_cast<uint8_t>(bits[k / 8]) >> (k % 8)) & 1u ? -scale : scale;
}

// A varint at p (room checked by the caller: at most 10 bytes); returns the byte after it.
std::byte* write_varint(std::byte* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

// Values of one wire type, one loop per type: the type is decided once a message, not per entry
// (DCT-DP's messages carry millions of entries a step).
template <typename Convert>
void write_values_as(std::span<const float> values, std::byte* out, size_t width, Convert convert) {
  for (size_t k = 0; k < values.size(); ++k) {
    const auto bits = convert(values[k]);
    std::memcpy(out + k * width, &bits, width);
  }
}

void write_values(ValueType type, std::span<const float> values, std::byte* out) {
  switch (type) {
    case ValueType::bf16: return write_values_as(values, out, 2, float_to_bf16);
    case ValueType::f16: return write_values_as(values, out, 2, float_to_f16);
    case ValueType::f32: return write_values_as(values, out, 4, [](float v) { return v; });
    default: FRUGAL_CHECK(false, "i8 values need their row's scale (comm/dct/scaled_int8.h)");
  }
}

template <typename Bits, typename Convert>
void read_values_as(const std::byte* in, std::span<float> values, Convert convert) {
  for (size_t k = 0; k < values.size(); ++k) {
    Bits bits;
    std::memcpy(&bits, in + k * sizeof(Bits), sizeof(Bits));
    values[k] = convert(bits);
  }
}

void read_values(ValueType type, const std::byte* in, std::span<float> values) {
  switch (type) {
    case ValueType::bf16: return read_values_as<uint16_t>(in, values, bf16_to_float);
    case ValueType::f16: return read_values_as<uint16_t>(in, values, f16_to_float);
    case ValueType::f32: return read_values_as<float>(in, values, [](float v) { return v; });
    default: FRUGAL_CHECK(false, "i8 values need their row's scale (comm/dct/scaled_int8.h)");
  }
}

struct Parsed {
  EncodedInfo info;
  Reader reader;
};

Parsed parse_prefix(std::span<const std::byte> bytes) {
  Reader r(bytes);
  const uint8_t tag = r.byte();
  const uint8_t layout = tag >> 4, type = tag & 0x0f;
  if (layout > 1 || type > 3 || (layout == 0 && type == static_cast<uint8_t>(ValueType::sign))) {
    throw CodecError(fmt::format("bad encoded vector: unknown tag byte {:#04x}", tag));
  }
  const uint64_t dim = r.varint("dimension");
  if (dim > std::numeric_limits<uint32_t>::max()) {
    throw CodecError(fmt::format("bad encoded vector: dimension {} exceeds 2^32-1", dim));
  }
  return {{static_cast<Layout>(layout), static_cast<ValueType>(type), dim}, r};
}

}  // namespace

std::string_view to_string(ValueType type) {
  switch (type) {
    case ValueType::f32: return "f32";
    case ValueType::f16: return "f16";
    case ValueType::bf16: return "bf16";
    case ValueType::sign: return "sign";
    case ValueType::i8: return "i8";
  }
  return "?";
}

size_t value_bytes(ValueType type) {
  FRUGAL_CHECK(type != ValueType::sign, "sign values take one bit each plus a scale per message (sign_bytes)");
  return type == ValueType::f32 ? 4 : type == ValueType::i8 ? 1 : 2;
}

size_t sign_bytes(size_t entries) { return entries == 0 ? 0 : 4 + (entries + 7) / 8; }

void write_value(ValueType type, float v, std::byte* out) {
  FRUGAL_CHECK(type != ValueType::i8, "i8 values need their row's scale (comm/dct/scaled_int8.h)");
  if (type == ValueType::f32) {
    std::memcpy(out, &v, 4);
    return;
  }
  const uint16_t h = type == ValueType::bf16 ? float_to_bf16(v) : float_to_f16(v);
  std::memcpy(out, &h, 2);
}

float read_value(ValueType type, const std::byte* in) {
  FRUGAL_CHECK(type != ValueType::i8, "i8 values need their row's scale (comm/dct/scaled_int8.h)");
  if (type == ValueType::f32) {
    float v;
    std::memcpy(&v, in, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, in, 2);
  return type == ValueType::bf16 ? bf16_to_float(h) : f16_to_float(h);
}

std::vector<std::byte> encode_dense(std::span<const float> values, ValueType type) {
  FRUGAL_CHECK(type != ValueType::sign, "encode_dense: sign values travel in sparse messages only");
  std::vector<std::byte> out;
  out.reserve(1 + 10 + values.size() * value_bytes(type));
  out.push_back(static_cast<std::byte>(static_cast<uint8_t>(type)));
  put_varint(out, values.size());
  if (type == ValueType::f32) {
    const auto* p = reinterpret_cast<const std::byte*>(values.data());
    out.insert(out.end(), p, p + values.size_bytes());
  } else {
    for (float v : values) put_value(out, v, type);
  }
  return out;
}

size_t sparse_encoded_bytes(uint64_t dim, std::span<const uint32_t> indices, ValueType type) {
  FRUGAL_CHECK(type != ValueType::i8, "the vector codec has no i8 values (DCT-MP's activation exchange only)");
  size_t n = 1 + varint_bytes(dim) + varint_bytes(indices.size());
  int64_t prev = -1;
  for (uint32_t i : indices) {
    n += varint_bytes(static_cast<uint64_t>(static_cast<int64_t>(i) - prev - 1));
    prev = i;
  }
  return n + (type == ValueType::sign ? sign_bytes(indices.size()) : indices.size() * value_bytes(type));
}

std::vector<std::byte> encode_sparse(uint64_t dim, std::span<const uint32_t> indices,
                                     std::span<const float> values, ValueType type) {
  std::vector<std::byte> out;
  encode_sparse(dim, indices, values, type, out);
  return out;
}

void encode_sparse(uint64_t dim, std::span<const uint32_t> indices, std::span<const float> values, ValueType type,
                   std::vector<std::byte>& out) {
  FRUGAL_CHECK(indices.size() == values.size(),
               fmt::format("encode_sparse: {} indices but {} values", indices.size(), values.size()));
  FRUGAL_CHECK(dim <= std::numeric_limits<uint32_t>::max(),
               fmt::format("encode_sparse: dimension {} exceeds 2^32-1", dim));
  FRUGAL_CHECK(type != ValueType::i8, "the vector codec has no i8 values (DCT-MP's activation exchange only)");
  // Written through a pointer into room for the longest encoding (5 bytes an index gap), then
  // trimmed: no per-byte push_back, and no pass beforehand to size it.
  const size_t w = type == ValueType::sign ? 0 : value_bytes(type);
  out.resize(1 + 2 * 10 + indices.size() * (5 + w));
  std::byte* p = out.data();
  *p++ = static_cast<std::byte>(0x10 | static_cast<uint8_t>(type));
  p = write_varint(p, dim);
  p = write_varint(p, indices.size());
  int64_t prev = -1;
  for (uint32_t i : indices) {
    FRUGAL_CHECK(static_cast<int64_t>(i) > prev && i < dim,
                 fmt::format("encode_sparse: index {} after {} is not increasing or not < {}", i,
                             prev, dim));
    p = write_varint(p, static_cast<uint64_t>(static_cast<int64_t>(i) - prev - 1));
    prev = i;
  }
  if (type != ValueType::sign) {
    write_values(type, values, p);
    out.resize(static_cast<size_t>(p - out.data()) + values.size() * w);
    return;
  }
  out.resize(static_cast<size_t>(p - out.data()));
  if (values.empty()) return;
  const float scale = std::abs(values[0]);
  FRUGAL_CHECK(scale > 0.0f && std::isfinite(scale), fmt::format("encode_sparse: sign scale {} is not > 0 and finite", scale));
  put_value(out, scale, ValueType::f32);
  const size_t bits = out.size();
  out.resize(bits + (values.size() + 7) / 8, std::byte{0});
  for (size_t k = 0; k < values.size(); ++k) {
    FRUGAL_CHECK(std::abs(values[k]) == scale,
                 fmt::format("encode_sparse: sign value {} at entry {} is not +-{}", values[k], k, scale));
    if (values[k] < 0.0f) out[bits + k / 8] |= static_cast<std::byte>(1u << (k % 8));
  }
}

std::vector<std::byte> encode_auto(std::span<const float> values, ValueType type) {
  std::vector<uint32_t> nz;
  std::vector<float> nzv;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0.0f) {
      nz.push_back(static_cast<uint32_t>(i));
      nzv.push_back(values[i]);
    }
  }
  const size_t dense = 1 + varint_bytes(values.size()) + values.size() * value_bytes(type);
  if (values.size() <= std::numeric_limits<uint32_t>::max() &&
      sparse_encoded_bytes(values.size(), nz, type) < dense) {
    return encode_sparse(values.size(), nz, nzv, type);
  }
  return encode_dense(values, type);
}

EncodedInfo peek(std::span<const std::byte> bytes) { return parse_prefix(bytes).info; }

SparseVector decode(std::span<const std::byte> bytes) {
  SparseVector v;
  decode(bytes, v);
  return v;
}

void decode(std::span<const std::byte> bytes, SparseVector& v) {
  auto [info, r] = parse_prefix(bytes);
  const size_t w = info.type == ValueType::sign ? 0 : value_bytes(info.type);
  v.dim = info.dim;
  if (info.layout == Layout::dense) {
    if (r.left() != info.dim * w) {
      throw CodecError(fmt::format("bad encoded vector: dense dimension {} needs {} value bytes, "
                                   "{} present", info.dim, info.dim * w, r.left()));
    }
    v.indices.resize(info.dim);
    v.values.resize(info.dim);
    const std::byte* p = r.take(info.dim * w, "values");
    for (size_t i = 0; i < info.dim; ++i) {
      v.indices[i] = static_cast<uint32_t>(i);
      v.values[i] = read_value(info.type, p + i * w);
    }
    return;
  }
  const uint64_t nnz = r.varint("entry count");
  // Each entry takes at least one index byte and w value bytes (sign: one index byte and a bit):
  // bound nnz before allocating.
  if (nnz > info.dim || nnz > r.left() / (1 + w)) {
    throw CodecError(fmt::format("bad encoded vector: {} entries do not fit dimension {} or the {} "
                                 "bytes left", nnz, info.dim, r.left()));
  }
  v.indices.resize(nnz);
  v.values.resize(nnz);
  int64_t prev = -1;
  for (uint64_t k = 0; k < nnz; ++k) {
    const uint64_t gap = r.varint("index gap");
    const uint64_t idx = static_cast<uint64_t>(prev + 1) + gap;
    if (gap >= info.dim || idx >= info.dim) {
      throw CodecError(fmt::format("bad encoded vector: entry {} has index {} >= dimension {}", k,
                                   idx, info.dim));
    }
    v.indices[k] = static_cast<uint32_t>(idx);
    prev = static_cast<int64_t>(idx);
  }
  if (info.type == ValueType::sign) {
    read_signs(r, v.values);
    return;
  }
  if (r.left() != nnz * w) {
    throw CodecError(fmt::format("bad encoded vector: {} entries need {} value bytes, {} present",
                                 nnz, nnz * w, r.left()));
  }
  read_values(info.type, r.take(nnz * w, "values"), v.values);
}

void decode_into(std::span<const std::byte> bytes, std::span<float> out) {
  const EncodedInfo info = peek(bytes);
  FRUGAL_CHECK(info.dim == out.size(),
               fmt::format("decode_into: encoded dimension {} but output has {} floats", info.dim,
                           out.size()));
  const SparseVector v = decode(bytes);
  if (info.layout == Layout::sparse) std::fill(out.begin(), out.end(), 0.0f);
  for (size_t k = 0; k < v.indices.size(); ++k) out[v.indices[k]] = v.values[k];
}

}  // namespace frugal::comm
