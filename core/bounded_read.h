// Reading containers from untrusted cereal binary archives (checkpoint slice files, id maps). cereal
// resizes a string or vector to the size tag it reads before reading the elements, so a damaged file
// of a few bytes can ask for terabytes (std::bad_alloc, std::length_error, or the OOM killer). These
// read the same bytes as cereal's own loaders but first check the count against the bytes the stream
// still holds. Internal header.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <type_traits>
#include <vector>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

// The bytes between `in`'s read position and its end; UINT64_MAX (no bound) for a stream that
// cannot seek.
inline uint64_t bytes_left(std::istream& in) {
  const auto here = in.tellg();
  if (here < 0) return UINT64_MAX;
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(here);
  if (end < here) return UINT64_MAX;
  return static_cast<uint64_t>(end - here);
}

// Reads a count (cereal's size tag) of elements of `element_bytes` bytes each; throws frugal::Error
// naming `what` when they cannot fit in the rest of `in`.
inline uint64_t read_count(cereal::BinaryInputArchive& ar, std::istream& in, uint64_t element_bytes,
                           const std::string& what) {
  uint64_t n = 0;
  ar(cereal::make_size_tag(n));
  const uint64_t left = bytes_left(in);
  if (element_bytes > 0 && n > left / element_bytes)
    throw Error(fmt::format("{}: {} elements of {} bytes, but only {} bytes are left: truncated or corrupt", what, n,
                            element_bytes, left));
  return n;
}

// cereal's std::string format: the size tag, then the bytes.
inline void read_string(cereal::BinaryInputArchive& ar, std::istream& in, std::string& s, const std::string& what) {
  s.resize(read_count(ar, in, 1, what));
  if (!s.empty()) ar(cereal::binary_data(s.data(), s.size()));
}

// cereal's format of a vector of numbers: the size tag, then the elements' bytes.
template <class T>
void read_vector(cereal::BinaryInputArchive& ar, std::istream& in, std::vector<T>& v, const std::string& what) {
  static_assert(std::is_arithmetic_v<T>);
  v.resize(read_count(ar, in, sizeof(T), what));
  if (!v.empty()) ar(cereal::binary_data(v.data(), v.size() * sizeof(T)));
}

}  // namespace frugal
