// Tensor: a row-major matrix of floats whose rows start on 64-byte boundaries when cols is a
// multiple of 16, so SIMD kernels can load whole rows. The only dense container frugal uses.
// A Tensor says on which Device its data lives; today every Tensor is in host memory (a device
// Backend will keep weights and optimizer state resident on its device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace frugal {

enum class DeviceKind : uint8_t { host, cuda };

struct Device {
  DeviceKind kind = DeviceKind::host;
  int index = 0;  // which device of its kind (0 for the host)
  bool is_host() const { return kind == DeviceKind::host; }
  friend bool operator==(const Device&, const Device&) = default;
};

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
  // Where data() points: the host for every Tensor today.
  Device device() const { return device_; }

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
  Device device_{};
  std::unique_ptr<float[], FreeAligned> data_;
};

}  // namespace frugal
