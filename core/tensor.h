// Tensor: a row-major matrix of floats whose rows start on 64-byte boundaries when cols is a
// multiple of 16, so SIMD kernels can load whole rows. The only dense container frugal uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace frugal {

class Tensor {
 public:
  Tensor() = default;
  Tensor(size_t rows, size_t cols);  // zero-initialized
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  // Changes the shape, keeping the allocation when it is large enough; contents are unspecified.
  void resize(size_t rows, size_t cols);
  void zero();
  void fill(float v);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t size() const { return rows_ * cols_; }
  bool empty() const { return size() == 0; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  float* row(size_t r) { return data_.get() + r * cols_; }
  const float* row(size_t r) const { return data_.get() + r * cols_; }
  float& at(size_t r, size_t c) { return data_.get()[r * cols_ + c]; }
  float at(size_t r, size_t c) const { return data_.get()[r * cols_ + c]; }
  std::span<float> span() { return {data(), size()}; }
  std::span<const float> span() const { return {data(), size()}; }

 private:
  struct FreeAligned {
    void operator()(float* p) const;
  };
  size_t rows_ = 0, cols_ = 0, capacity_ = 0;
  std::unique_ptr<float[], FreeAligned> data_;
};

}  // namespace frugal
