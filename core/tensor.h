// Tensor: a row-major matrix whose rows start on 64-byte boundaries when a row is a multiple of 64
// bytes, so SIMD kernels can load whole rows. The only dense container frugal uses.
//
// Elements are f32, or bf16 for storage (`--precision bf16`: the large row-sparse parameters and
// their optimizer moments take half the memory and half the bandwidth). A bf16 element is the high
// half of an f32, so widening is exact; kernels widen and compute in f32. The float accessors
// (data(), row(), at(), span()) are for f32 tensors and throw frugal::Error on a bf16 one: code that
// handles both asks dtype() and uses bf16_row(), or the converting value_at() / set_value() / assign().
//
// A Tensor's data lives in host memory. A device Backend keeps copies of the tensors it computes on
// (weights, optimizer state) on its device between ops (core/device_mirror.h); what it needs to
// know for that travels with the data in a TensorStamp: every non-const access marks the host copy
// written, so a device copy is refreshed after the host changed the tensor and only then.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string_view>

namespace frugal {

enum class DeviceKind : uint8_t { host, cuda };

struct Device {
  DeviceKind kind = DeviceKind::host;
  int index = 0;  // which device of its kind (0 for the host)
  bool is_host() const { return kind == DeviceKind::host; }
  friend bool operator==(const Device&, const Device&) = default;
};

// In front of every tensor's data (the 64 bytes before it, so the data stays aligned), moving with it.
struct TensorStamp {
  // The host changed the data since a device mirror last synced it (set by every non-const access
  // of the Tensor: data(), row(), at(), span(), the bf16 accessors, set_value, write_row, zero,
  // fill, assign, copies into it). A mirror clears it when it has the host's values.
  std::atomic<bool> host_written{true};
  // A mirror holds a device copy of this data: freeing the data tells the mirrors to drop it.
  std::atomic<bool> mirrored{false};
};
// Called when the data of a mirrored tensor is freed (core/device_mirror.cpp).
void forget_device_copies(const void* data) noexcept;

enum class Dtype : uint8_t { f32, bf16 };
std::string_view dtype_name(Dtype dtype);
// "f32" or "bf16"; throws frugal::Error naming the text otherwise.
Dtype dtype_from_string(std::string_view name);
inline size_t dtype_bytes(Dtype dtype) { return dtype == Dtype::f32 ? 4 : 2; }

// bf16 <-> f32. Widening is exact; narrowing rounds to nearest, ties to even (NaN stays NaN).
inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
// Stochastic rounding: rounds up with probability equal to the dropped fraction, given 16 random
// bits. Unbiased, so updates far below a bf16 step still move a weight on average (round to nearest
// would drop every Adam step smaller than half a step of the weight). Infinities stay (their low
// bits are zero), NaN stays NaN; a value beyond the largest bf16 may round to infinity, as round to
// nearest does. Branch-free: kernels run it on 8 lanes at once (kernels/vector_ops.cpp).
inline uint16_t f32_to_bf16_stochastic(float f, uint32_t random16) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t nan = (bits & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u;
  return static_cast<uint16_t>(((bits + (random16 & 0xffffu)) >> 16) | nan);
}

class Tensor {
 public:
  Tensor() = default;
  Tensor(size_t rows, size_t cols, Dtype dtype = Dtype::f32);  // zero-initialized
  // Copies keep the source's dtype (assign() converts into this tensor's).
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  // Changes the shape, keeping the dtype and the allocation when it is large enough; contents are
  // unspecified.
  void resize(size_t rows, size_t cols);
  void zero();
  void fill(float v);
  // Takes other's shape and values in this tensor's dtype (rounding to nearest into bf16).
  void assign(const Tensor& other);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t size() const { return rows_ * cols_; }
  bool empty() const { return size() == 0; }
  Dtype dtype() const { return dtype_; }
  size_t bytes() const { return size() * dtype_bytes(dtype_); }
  // Where data() points: the host for every Tensor (a device backend's copies are its own).
  Device device() const { return device_; }

  // Non-const accessors mark the data written (TensorStamp); read through a const Tensor where
  // nothing is written, or a device backend copies the tensor again for nothing.
  float* data() { return written(f32()); }
  const float* data() const { return f32(); }
  float* row(size_t r) { return written(f32()) + r * cols_; }
  const float* row(size_t r) const { return f32() + r * cols_; }
  float& at(size_t r, size_t c) { return written(f32())[r * cols_ + c]; }
  float at(size_t r, size_t c) const { return f32()[r * cols_ + c]; }
  std::span<float> span() { return {data(), size()}; }
  std::span<const float> span() const { return {data(), size()}; }

  // bf16 tensors only (throw on an f32 one).
  uint16_t* bf16_data() { return written(half()); }
  const uint16_t* bf16_data() const { return half(); }
  uint16_t* bf16_row(size_t r) { return written(half()) + r * cols_; }
  const uint16_t* bf16_row(size_t r) const { return half() + r * cols_; }

  // The stamp in front of the data (null while nothing is allocated), for device mirrors.
  TensorStamp* stamp() const {
    return data_ != nullptr ? std::launder(reinterpret_cast<TensorStamp*>(data_.get() - kStampBytes)) : nullptr;
  }
  // Bytes in front of the data that hold its TensorStamp (keeping the data 64-byte aligned).
  static constexpr size_t kStampBytes = 64;
  // The data as bytes, whatever the dtype, without marking it written (device mirrors; null while
  // nothing is allocated).
  const std::byte* raw() const { return data_.get(); }

  // Either dtype, one element at a time (checkpoints, slicing; not for kernels).
  float value_at(size_t r, size_t c) const;
  void set_value(size_t r, size_t c, float v);
  // Row r widened to f32 into out (cols() floats), and out narrowed (to nearest) into row r.
  void read_row(size_t r, float* out) const;
  void write_row(size_t r, const float* in);

 private:
  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  [[noreturn]] void wrong_dtype(Dtype wanted) const;
  // Marks the data written. Read first and stored only when not yet marked: kernels call non-const
  // accessors from several threads at once, and a store every time would bounce the stamp's cache
  // line between the cores.
  template <class T>
  T* written(T* p) {
    if (data_ != nullptr) {
      std::atomic<bool>& w = stamp()->host_written;
      if (!w.load(std::memory_order_relaxed)) w.store(true, std::memory_order_relaxed);
    }
    return p;
  }
  float* f32() const {
    if (dtype_ != Dtype::f32) [[unlikely]] wrong_dtype(Dtype::f32);
    return reinterpret_cast<float*>(data_.get());
  }
  uint16_t* half() const {
    if (dtype_ != Dtype::bf16) [[unlikely]] wrong_dtype(Dtype::bf16);
    return reinterpret_cast<uint16_t*>(data_.get());
  }

  size_t rows_ = 0, cols_ = 0, capacity_ = 0;  // capacity in bytes
  Dtype dtype_ = Dtype::f32;
  Device device_{};
  std::unique_ptr<std::byte[], FreeAligned> data_;
};

// src's values in the given dtype.
Tensor converted(const Tensor& src, Dtype dtype);

}  // namespace frugal
