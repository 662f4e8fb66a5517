// Message codecs for float vectors: dense f32 (exact), f16 or bf16 values (half the bytes), and
// sparse (sorted indices as delta varints plus values). encode_auto picks sparse or dense by the
// encoded size, so thresholded gradients and top-k activations travel as what they are.
//
// Layout: one tag byte (layout << 4 | value type), varint dim, then
//   dense:  dim values;
//   sparse: varint nnz, nnz varints (first index, then gaps - 1), nnz values.
// Values are little-endian f32, f16 or bf16; or, for ValueType::sign (sparse only), an f32 scale
// > 0 followed by ceil(nnz / 8) bytes of sign bits (bit k % 8 of byte k / 8 set: entry k is
// -scale; unused bits zero), nothing at all when nnz is 0. The decoder checks every length, index and gap and
// never allocates more than the input could describe, so untrusted bytes cannot crash it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "comm/exchange.h"  // ValueType

namespace frugal::comm {

std::string_view to_string(ValueType type);  // "f32", "f16", "bf16" (as flags and run configs name them)
enum class Layout : uint8_t { dense = 0, sparse = 1 };

class CodecError : public Error {
 public:
  using Error::Error;
};

struct SparseVector {
  uint64_t dim = 0;
  std::vector<uint32_t> indices;  // strictly increasing, < dim
  std::vector<float> values;
};

// Bytes per value; ValueType::sign has no whole number of them (sign_bytes says what it takes).
size_t value_bytes(ValueType type);
// The bytes that follow the indices of a sign message of `entries` entries.
size_t sign_bytes(size_t entries);
// One value as `type` stores it on the wire: value_bytes(type) little-endian bytes at `out`
// (f16/bf16 rounded to nearest even), and back.
void write_value(ValueType type, float v, std::byte* out);
float read_value(ValueType type, const std::byte* in);

std::vector<std::byte> encode_dense(std::span<const float> values, ValueType type = ValueType::f32);
// indices strictly increasing and < dim (checked). ValueType::sign: every value must be +s or -s
// for one s > 0 (checked).
std::vector<std::byte> encode_sparse(uint64_t dim, std::span<const uint32_t> indices,
                                     std::span<const float> values,
                                     ValueType type = ValueType::f32);
// The same into `out` (its capacity reused: a step's message allocates nothing once warm).
void encode_sparse(uint64_t dim, std::span<const uint32_t> indices, std::span<const float> values, ValueType type,
                   std::vector<std::byte>& out);
// Sparse over the non-zero entries or dense, whichever encodes smaller.
std::vector<std::byte> encode_auto(std::span<const float> values, ValueType type = ValueType::f32);

// Exact size encode_sparse would produce, without encoding.
size_t sparse_encoded_bytes(uint64_t dim, std::span<const uint32_t> indices, ValueType type);

struct EncodedInfo {
  Layout layout;
  ValueType type;
  uint64_t dim;
};
EncodedInfo peek(std::span<const std::byte> bytes);

// Either layout into (indices, values); a dense message yields every index.
SparseVector decode(std::span<const std::byte> bytes);
// The same into `into`, reusing its vectors' capacity.
void decode(std::span<const std::byte> bytes, SparseVector& into);
// Either layout into a dense vector of exactly dim floats (absent entries are zero).
void decode_into(std::span<const std::byte> bytes, std::span<float> out);

}  // namespace frugal::comm
