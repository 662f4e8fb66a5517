// Tensor: a row-major matrix, a view of a Buffer (core/buffer.h): {buffer, byte offset, rows, cols,
// dtype}. The buffer belongs to the backend that computes on it: host memory for the CPU backend
// (and for every tensor made without a backend), device memory for a device backend. Rows start on
// 64-byte boundaries when a row is a multiple of 64 bytes and the view starts at the buffer's start,
// so SIMD kernels can load whole rows. The only dense container frugal uses.
//
// Elements are f32, or bf16 for storage (`--precision bf16`: the large row-sparse parameters and
// their optimizer moments take half the memory and half the bandwidth), f64 (per-sample losses),
// or the unsigned integers u32 / u64 of a step's index arrays (a sparse batch's CSR, the softmax's
// offsets and positions). A bf16 element is the high half of an f32, so widening is exact; kernels
// widen and compute in f32. The typed accessors (data(), row(), at(), span() for f32; bf16_*;
// u32(), u64(), f64()) throw frugal::Error on
// another dtype, and on a tensor whose buffer the host may not touch (a device's): host code moves
// a device tensor's bytes with copy_to_host / copy_from_host (or its backend's set / get), never
// through a pointer. Nothing is found by host address: a device keeps no copies of host tensors,
// it computes on its own buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "core/buffer.h"

namespace frugal {

enum class Dtype : uint8_t { f32, bf16, u32, u64, f64 };
std::string_view dtype_name(Dtype dtype);
// "f32" or "bf16" (the precisions a user picks); throws frugal::Error naming the text otherwise.
Dtype dtype_from_string(std::string_view name);
inline size_t dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::bf16: return 2;
    case Dtype::u64:
    case Dtype::f64: return 8;
    default: return 4;
  }
}

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
  Tensor(size_t rows, size_t cols, Dtype dtype = Dtype::f32);  // host memory, zero-initialized
  // In `backend`'s memory (its alloc_buffer), zero-initialized.
  Tensor(size_t rows, size_t cols, Dtype dtype, Backend& backend);
  // A view of `buffer` from byte `offset` (the bytes stay the buffer's; nothing is copied).
  static Tensor view(std::shared_ptr<Buffer> buffer, size_t offset, size_t rows, size_t cols, Dtype dtype);
  // Host memory owned elsewhere seen as a tensor (core/buffer.h's wrap_host_memory).
  static Tensor wrap(void* data, size_t rows, size_t cols, Dtype dtype);
  // Rows [first, first + count) of this tensor, sharing its buffer.
  Tensor rows_view(size_t first, size_t count) const;

  // Copies are deep and stay where the source lives (host memory, or a new buffer of the same
  // backend, copied by it); assign() converts into this tensor's dtype.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  // Changes the shape, keeping the dtype, the place and the allocation when it is large enough;
  // contents are unspecified.
  void resize(size_t rows, size_t cols);
  void zero();  // any place (a device tensor is cleared by its backend)
  void fill(float v);  // host, f32 or bf16
  // Takes other's shape and values in this tensor's dtype (rounding to nearest into bf16), keeping
  // this tensor's place (a device tensor receives them with one set).
  void assign(const Tensor& other);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t size() const { return rows_ * cols_; }
  bool empty() const { return size() == 0; }
  Dtype dtype() const { return dtype_; }
  size_t bytes() const { return size() * dtype_bytes(dtype_); }
  // Where the data lives: the host for a tensor without a buffer or with a host buffer.
  Device device() const { return buffer_ != nullptr ? buffer_->device() : Device{}; }
  bool is_host() const { return host_; }
  // The backend that owns the buffer (null: host memory).
  Backend* owner() const { return buffer_ != nullptr ? buffer_->owner() : nullptr; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }
  // The name errors use ("softmax.weight"); empty: the shape speaks for it.
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& name() const { return name_; }

  float* data() { return f32(); }
  const float* data() const { return f32(); }
  float* row(size_t r) { return f32() + r * cols_; }
  const float* row(size_t r) const { return f32() + r * cols_; }
  float& at(size_t r, size_t c) { return f32()[r * cols_ + c]; }
  float at(size_t r, size_t c) const { return f32()[r * cols_ + c]; }
  std::span<float> span() { return {data(), size()}; }
  std::span<const float> span() const { return {data(), size()}; }

  // bf16 tensors only (throw on an f32 one).
  uint16_t* bf16_data() { return typed<uint16_t>(Dtype::bf16); }
  const uint16_t* bf16_data() const { return typed<uint16_t>(Dtype::bf16); }
  uint16_t* bf16_row(size_t r) { return typed<uint16_t>(Dtype::bf16) + r * cols_; }
  const uint16_t* bf16_row(size_t r) const { return typed<uint16_t>(Dtype::bf16) + r * cols_; }

  // f64 tensors (per-sample losses summed in double), host only.
  std::span<double> f64() { return {typed<double>(Dtype::f64), size()}; }
  std::span<const double> f64() const { return {typed<double>(Dtype::f64), size()}; }
  // Index arrays (u32 / u64 tensors), host only.
  std::span<uint32_t> u32() { return {typed<uint32_t>(Dtype::u32), size()}; }
  std::span<const uint32_t> u32() const { return {typed<uint32_t>(Dtype::u32), size()}; }
  std::span<uint64_t> u64() { return {typed<uint64_t>(Dtype::u64), size()}; }
  std::span<const uint64_t> u64() const { return {typed<uint64_t>(Dtype::u64), size()}; }

  // The data's address on its device, whatever the dtype and place: for the backend that owns the
  // buffer (a device pointer) and for host code that moves raw bytes (null while nothing is
  // allocated).
  std::byte* device_data() const { return ptr_; }
  // The host data as bytes, whatever the dtype (comparisons, hashing; null while nothing is
  // allocated). Throws on a device tensor.
  const std::byte* raw() const {
    if (!host_) [[unlikely]] not_host();
    return ptr_;
  }

  // Either float dtype, one element at a time (checkpoints, slicing; not for kernels); host.
  float value_at(size_t r, size_t c) const;
  void set_value(size_t r, size_t c, float v);
  // Row r widened to f32 into out (cols() floats), and out narrowed (to nearest) into row r; host.
  void read_row(size_t r, float* out) const;
  void write_row(size_t r, const float* in);

 private:
  [[noreturn]] void wrong_dtype(Dtype wanted) const;
  [[noreturn]] void not_host() const;
  void allocate(size_t bytes);
  template <class T>
  T* typed(Dtype want) const {
    if (dtype_ != want) [[unlikely]] wrong_dtype(want);
    if (!host_) [[unlikely]] not_host();
    return reinterpret_cast<T*>(ptr_);
  }
  float* f32() const { return typed<float>(Dtype::f32); }

  size_t rows_ = 0, cols_ = 0;
  Dtype dtype_ = Dtype::f32;
  bool host_ = true;                 // the host may touch the data (no buffer yet counts as host)
  std::shared_ptr<Buffer> buffer_;   // null while nothing is allocated
  size_t offset_ = 0;                // bytes from the buffer's base
  std::byte* ptr_ = nullptr;         // buffer_->base() + offset_
  std::string name_;
};

// The host's view of a tensor's bytes: copy_to_host fills dst (t.bytes() bytes) from t wherever it
// lives (its backend's get for a device tensor; memcpy on the host), copy_from_host writes t's
// bytes (t keeps its shape) from src. They return when the copy is done.
void copy_to_host(const Tensor& t, void* dst);
void copy_from_host(Tensor& t, const void* src);
// A host copy of t (t itself copied when it is on the host already).
Tensor to_host(const Tensor& t);
// t's shape and values in `backend`'s memory (the host's when null).
Tensor to_backend(const Tensor& t, Backend* backend);
// t itself when the host may read it, else its host copy made in `scratch` (one get): for host code
// that reads a tensor which may live on a device (evaluation's bias, a checkpoint).
const Tensor& host_view(const Tensor& t, Tensor& scratch);
// For a tensor whose contents are scratch (an activation, a gradient, an op's output): when it
// lives elsewhere than where `backend` computes, it becomes an empty tensor there (same dtype and
// name); otherwise it is left as it is, allocation and all, so a step allocates nothing.
void keep_on(Tensor& t, Backend& backend);
// t := the values of src as a 1 x n tensor where t lives (one set on a device); T's size must be
// t's dtype's.
void check_element_bytes(const Tensor& t, size_t bytes);  // throws naming t when they differ
template <class T>
void assign_values(Tensor& t, std::span<const T> src) {
  check_element_bytes(t, sizeof(T));
  t.resize(1, src.size());
  copy_from_host(t, src.data());
}
// Rows [src_row, src_row + count) of src copied over rows [dst_row, ...) of dst (same columns
// and dtype; the same device, or host memory on either side), where they live.
void copy_rows(Tensor& dst, size_t dst_row, const Tensor& src, size_t src_row, size_t count);
// Moves t (values, shape, name) to where `backend` computes: into its memory when it computes on a
// device, to the host when it computes on the host (or is null). Nothing moves when t is there.
void place_on(Tensor& t, Backend* backend);

// src's values in the given dtype.
Tensor converted(const Tensor& src, Dtype dtype);

}  // namespace frugal
