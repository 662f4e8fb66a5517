#include "core/tensor_io.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

void save_tensor(cereal::BinaryOutputArchive& ar, const Tensor& tensor) {
  ar(static_cast<uint64_t>(tensor.rows()), static_cast<uint64_t>(tensor.cols()));
  if (tensor.empty()) return;
  // A device tensor is written from its host copy (one get).
  const Tensor host = tensor.is_host() ? Tensor() : to_host(tensor);
  const Tensor& t = tensor.is_host() ? tensor : host;
  // Files hold f32 whatever the tensor's precision, so a bf16 run resumes in f32 and back.
  if (t.dtype() == Dtype::f32) {
    ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
  } else {
    std::vector<float> row(t.cols());
    for (size_t r = 0; r < t.rows(); ++r) {
      t.read_row(r, row.data());
      ar(cereal::binary_data(row.data(), row.size() * sizeof(float)));
    }
  }
}

void load_tensor(cereal::BinaryInputArchive& ar, Tensor& tensor, size_t rows, size_t cols, const std::string& what) {
  uint64_t r = 0, c = 0;
  ar(r, c);
  FRUGAL_CHECK(r == rows && c == cols, fmt::format("checkpoint: {} is {}x{}, expected {}x{}", what, r, c, rows, cols));
  if (!tensor.is_host()) {  // read on the host, then one set into the device tensor
    Tensor host(0, 0, tensor.dtype());
    load_tensor(ar, host, rows, cols, what);
    tensor.resize(rows, cols);
    copy_from_host(tensor, host.device_data());
    return;
  }
  Tensor& t = tensor;
  t.resize(rows, cols);
  if (t.empty()) return;
  if (t.dtype() == Dtype::f32) {
    ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
  } else {
    std::vector<float> row(cols);
    for (size_t i = 0; i < rows; ++i) {
      ar(cereal::binary_data(row.data(), row.size() * sizeof(float)));
      t.write_row(i, row.data());
    }
  }
}

void save_file_header(cereal::BinaryOutputArchive& ar, const char (&magic)[8], uint32_t version) {
  ar(cereal::binary_data(magic, sizeof magic), version);
}

void check_file_header(cereal::BinaryInputArchive& ar, const char (&magic)[8], uint32_t version, const std::string& path,
                       const std::string& what) {
  char found[8] = {};
  uint32_t found_version = 0;
  ar(cereal::binary_data(found, sizeof found), found_version);
  FRUGAL_CHECK(std::equal(found, found + 8, magic), fmt::format("{}: not {}", path, what));
  FRUGAL_CHECK(found_version == version, fmt::format("{}: unsupported version {} (this build reads {})", path,
                                                     found_version, version));
}

}  // namespace frugal
