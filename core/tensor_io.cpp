#include "core/tensor_io.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

void save_tensor(cereal::BinaryOutputArchive& ar, const Tensor& t) {
  ar(static_cast<uint64_t>(t.rows()), static_cast<uint64_t>(t.cols()));
  if (!t.empty()) ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
}

void load_tensor(cereal::BinaryInputArchive& ar, Tensor& t, size_t rows, size_t cols, const std::string& what) {
  uint64_t r = 0, c = 0;
  ar(r, c);
  FRUGAL_CHECK(r == rows && c == cols, fmt::format("checkpoint: {} is {}x{}, expected {}x{}", what, r, c, rows, cols));
  t.resize(rows, cols);
  if (!t.empty()) ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
}

}  // namespace frugal
