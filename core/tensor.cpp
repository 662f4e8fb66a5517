#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace frugal {
namespace {
constexpr size_t kAlign = 64;

float* allocate(size_t n) {
  if (n == 0) return nullptr;
  const size_t bytes = ((n * sizeof(float) + kAlign - 1) / kAlign) * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}
}  // namespace

void Tensor::FreeAligned::operator()(float* p) const { std::free(p); }

Tensor::Tensor(size_t rows, size_t cols) { resize(rows, cols), zero(); }

Tensor::Tensor(const Tensor& other) : Tensor() { *this = other; }

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  resize(other.rows_, other.cols_);
  if (size() > 0) std::memcpy(data(), other.data(), size() * sizeof(float));
  return *this;
}

void Tensor::resize(size_t rows, size_t cols) {
  const size_t n = rows * cols;
  if (n > capacity_) {
    data_.reset(allocate(n));
    capacity_ = n;
  }
  rows_ = rows;
  cols_ = cols;
}

void Tensor::zero() {
  if (size() > 0) std::memset(data(), 0, size() * sizeof(float));
}

void Tensor::fill(float v) { std::fill(data(), data() + size(), v); }

}  // namespace frugal
