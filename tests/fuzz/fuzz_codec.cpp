// libFuzzer target: the sparse/dense codec decoder. Any input must decode or throw CodecError;
// what decodes must survive a re-encode and decode unchanged (f32 values compared bitwise).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "comm/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace frugal::comm;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  try {
    const EncodedInfo info = peek(in);
    const SparseVector v = decode(in);
    const auto again = decode(encode_sparse(v.dim, v.indices, v.values, info.type));
    if (again.indices != v.indices || again.values.size() != v.values.size()) __builtin_trap();
    if (!v.values.empty() &&
        std::memcmp(again.values.data(), v.values.data(), v.values.size() * sizeof(float)) != 0 &&
        info.type == ValueType::f32) {
      __builtin_trap();
    }
    if (info.dim <= 4096) {
      std::vector<float> dense(info.dim);
      decode_into(in, dense);
    }
  } catch (const CodecError&) {
  }
  return 0;
}
