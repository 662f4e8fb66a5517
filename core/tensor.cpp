#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "core/check.h"
#include "core/huge_pages.h"

namespace frugal {
namespace {
constexpr size_t kAlign = Tensor::kStampBytes;
static_assert(sizeof(TensorStamp) <= kAlign);

// The data, kAlign bytes after a TensorStamp. Big tensors (weights, optimizer moments, row-sparse
// gradients) are read a sampled row at a time: their memory is on huge pages (core/huge_pages.h).
std::byte* allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = allocate_for_random_access(kAlign + ((bytes + kAlign - 1) / kAlign) * kAlign, kAlign);
  new (p) TensorStamp();
  return static_cast<std::byte*>(p) + kAlign;
}

TensorStamp* stamp_of(std::byte* data) { return std::launder(reinterpret_cast<TensorStamp*>(data - kAlign)); }
}  // namespace

std::string_view dtype_name(Dtype dtype) { return dtype == Dtype::f32 ? "f32" : "bf16"; }

Dtype dtype_from_string(std::string_view name) {
  if (name == "f32") return Dtype::f32;
  if (name == "bf16") return Dtype::bf16;
  throw Error(fmt::format("unknown precision '{}': expected f32 or bf16", name));
}

void Tensor::FreeAligned::operator()(std::byte* p) const {
  TensorStamp* s = stamp_of(p);
  if (s->mirrored.load(std::memory_order_acquire)) forget_device_copies(p);
  s->~TensorStamp();
  free_for_random_access(p - kAlign);
}



void Tensor::wrong_dtype(Dtype wanted) const {
  throw Error(fmt::format("a {}x{} {} tensor was used as {} (a kernel or caller does not handle this precision)",
                          rows_, cols_, dtype_name(dtype_), dtype_name(wanted)));
}

Tensor::Tensor(size_t rows, size_t cols, Dtype dtype) : dtype_(dtype) { resize(rows, cols), zero(); }

Tensor::Tensor(const Tensor& other) : Tensor() { *this = other; }

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  dtype_ = other.dtype_;
  resize(other.rows_, other.cols_);
  if (size() > 0) std::memcpy(written(data_.get()), other.data_.get(), bytes());
  return *this;
}

void Tensor::resize(size_t rows, size_t cols) {
  const size_t bytes = rows * cols * dtype_bytes(dtype_);
  if (bytes > capacity_) {
    data_.reset(allocate(bytes));
    capacity_ = bytes;
  }
  rows_ = rows;
  cols_ = cols;
  if (data_ != nullptr) written(data_.get());  // the contents are unspecified now
}

void Tensor::zero() {
  if (size() > 0) std::memset(written(data_.get()), 0, bytes());
}

void Tensor::fill(float v) {
  if (dtype_ == Dtype::f32) {
    std::fill(data(), data() + size(), v);
  } else {
    std::fill(bf16_data(), bf16_data() + size(), f32_to_bf16(v));
  }
}

void Tensor::assign(const Tensor& other) {
  if (other.dtype_ == dtype_) {
    *this = other;
    return;
  }
  resize(other.rows_, other.cols_);
  const size_t n = size();
  if (dtype_ == Dtype::bf16) {
    const float* src = other.data();
    uint16_t* dst = bf16_data();
    for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  } else {
    const uint16_t* src = other.bf16_data();
    float* dst = data();
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
}

float Tensor::value_at(size_t r, size_t c) const {
  return dtype_ == Dtype::f32 ? at(r, c) : bf16_to_f32(bf16_row(r)[c]);
}

void Tensor::set_value(size_t r, size_t c, float v) {
  if (dtype_ == Dtype::f32) {
    at(r, c) = v;
  } else {
    bf16_row(r)[c] = f32_to_bf16(v);
  }
}

void Tensor::read_row(size_t r, float* out) const {
  if (dtype_ == Dtype::f32) {
    std::memcpy(out, row(r), cols_ * sizeof(float));
    return;
  }
  const uint16_t* h = bf16_row(r);
  for (size_t c = 0; c < cols_; ++c) out[c] = bf16_to_f32(h[c]);
}

void Tensor::write_row(size_t r, const float* in) {
  if (dtype_ == Dtype::f32) {
    std::memcpy(row(r), in, cols_ * sizeof(float));
    return;
  }
  uint16_t* h = bf16_row(r);
  for (size_t c = 0; c < cols_; ++c) h[c] = f32_to_bf16(in[c]);
}

Tensor converted(const Tensor& src, Dtype dtype) {
  Tensor out(0, 0, dtype);
  out.assign(src);
  return out;
}

}  // namespace frugal
