#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"

namespace frugal {

std::string_view dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return "f32";
    case Dtype::bf16: return "bf16";
    case Dtype::u32: return "u32";
    case Dtype::u64: return "u64";
    case Dtype::f64: return "f64";
  }
  return "?";
}

Dtype dtype_from_string(std::string_view name) {
  if (name == "f32") return Dtype::f32;
  if (name == "bf16") return Dtype::bf16;
  throw Error(fmt::format("unknown precision '{}': expected f32 or bf16", name));
}

namespace {
std::string describe(const Tensor& t) {
  return fmt::format("{}{}x{} {} tensor", t.name().empty() ? "a " : "tensor '" + t.name() + "' (", t.rows(), t.cols(),
                     dtype_name(t.dtype())) + (t.name().empty() ? "" : ")");
}
}  // namespace

void Tensor::wrong_dtype(Dtype wanted) const {
  throw Error(fmt::format("{} was used as {} (a kernel or caller does not handle this type)", describe(*this),
                          dtype_name(wanted)));
}

void Tensor::not_host() const {
  throw Error(fmt::format("{} lives on {}, where the host may not read or write it: copy it with copy_to_host / "
                          "copy_from_host (its backend's get / set)",
                          describe(*this), device().name()));
}

Tensor::Tensor(size_t rows, size_t cols, Dtype dtype) : dtype_(dtype) { resize(rows, cols), zero(); }

Tensor::Tensor(size_t rows, size_t cols, Dtype dtype, Backend& backend) : dtype_(dtype) {
  // An empty buffer of the backend fixes the place; resize() allocates there.
  buffer_ = backend.alloc_buffer(0);
  host_ = buffer_->is_host();
  resize(rows, cols);
  zero();
}

Tensor Tensor::view(std::shared_ptr<Buffer> buffer, size_t offset, size_t rows, size_t cols, Dtype dtype) {
  FRUGAL_CHECK(buffer != nullptr, "Tensor::view of no buffer");
  FRUGAL_CHECK(offset + rows * cols * dtype_bytes(dtype) <= buffer->bytes(),
               fmt::format("Tensor::view: {}x{} {} from byte {} runs past a buffer of {} bytes", rows, cols,
                           dtype_name(dtype), offset, buffer->bytes()));
  Tensor t;
  t.rows_ = rows;
  t.cols_ = cols;
  t.dtype_ = dtype;
  t.host_ = buffer->is_host();
  t.ptr_ = buffer->base() + offset;
  t.offset_ = offset;
  t.buffer_ = std::move(buffer);
  return t;
}

Tensor Tensor::wrap(void* data, size_t rows, size_t cols, Dtype dtype) {
  const size_t bytes = rows * cols * dtype_bytes(dtype);
  return view(wrap_host_memory(data, bytes), 0, rows, cols, dtype);
}

Tensor Tensor::rows_view(size_t first, size_t count) const {
  FRUGAL_CHECK(first + count <= rows_, fmt::format("rows {}..{} of {}", first, first + count, describe(*this)));
  if (buffer_ == nullptr) return Tensor(0, cols_, dtype_);
  Tensor t = view(buffer_, offset_ + first * cols_ * dtype_bytes(dtype_), count, cols_, dtype_);
  t.name_ = name_;
  return t;
}

Tensor::Tensor(const Tensor& other) : Tensor() { *this = other; }

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  if (other.owner() != owner()) {
    // Take the source's place: a fresh (empty) buffer there; resize() allocates.
    buffer_ = other.owner() != nullptr ? other.owner()->alloc_buffer(0) : nullptr;
    host_ = buffer_ == nullptr || buffer_->is_host();
    ptr_ = buffer_ != nullptr ? buffer_->base() : nullptr;
    offset_ = 0;
  }
  dtype_ = other.dtype_;
  name_ = other.name_;
  resize(other.rows_, other.cols_);
  if (size() == 0) return *this;
  if (host_ && other.host_) {
    std::memcpy(ptr_, other.ptr_, bytes());
  } else {
    owner()->copy(*buffer_, offset_, *other.buffer_, other.offset_, bytes());
  }
  return *this;
}

void Tensor::allocate(size_t bytes) {
  Backend* backend = owner();
  buffer_ = backend != nullptr ? backend->alloc_buffer(bytes) : alloc_host_buffer(bytes);
  host_ = buffer_->is_host();
  offset_ = 0;
  ptr_ = buffer_->base();
}

void Tensor::resize(size_t rows, size_t cols) {
  const size_t bytes = rows * cols * dtype_bytes(dtype_);
  const size_t capacity = buffer_ != nullptr ? buffer_->bytes() - offset_ : 0;
  if (bytes > capacity) allocate(bytes);
  rows_ = rows;
  cols_ = cols;
}

void Tensor::zero() {
  if (size() == 0) return;
  if (host_) {
    std::memset(ptr_, 0, bytes());
  } else {
    owner()->clear(*buffer_, offset_, bytes());
  }
}

void Tensor::fill(float v) {
  if (dtype_ == Dtype::f32) {
    std::fill(data(), data() + size(), v);
  } else {
    std::fill(bf16_data(), bf16_data() + size(), f32_to_bf16(v));
  }
}

void Tensor::assign(const Tensor& other) {
  if (other.dtype_ == dtype_ && other.owner() == owner()) {
    *this = other;
    return;
  }
  if (!host_ || !other.host_) {
    // Converted on the host, then one set into this tensor where it lives.
    Tensor converted_host(0, 0, dtype_);
    converted_host.assign(to_host(other));
    resize(converted_host.rows_, converted_host.cols_);
    copy_from_host(*this, converted_host.ptr_);
    return;
  }
  if (other.dtype_ == dtype_) {
    resize(other.rows_, other.cols_);
    if (size() > 0) std::memcpy(ptr_, other.ptr_, bytes());
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

void copy_to_host(const Tensor& t, void* dst) {
  if (t.bytes() == 0) return;
  if (t.is_host()) {
    std::memcpy(dst, t.device_data(), t.bytes());
  } else {
    t.owner()->get(*t.buffer(), t.offset(), dst, t.bytes());
  }
}

void copy_from_host(Tensor& t, const void* src) {
  if (t.bytes() == 0) return;
  if (t.is_host()) {
    std::memcpy(t.device_data(), src, t.bytes());
  } else {
    t.owner()->set(*t.buffer(), t.offset(), src, t.bytes());
  }
}

Tensor to_host(const Tensor& t) {
  if (t.is_host()) return t;
  Tensor out(t.rows(), t.cols(), t.dtype());
  out.set_name(t.name());
  copy_to_host(t, out.device_data());
  return out;
}

Tensor to_backend(const Tensor& t, Backend* backend) {
  if (backend == nullptr) return to_host(t);
  Tensor out(t.rows(), t.cols(), t.dtype(), *backend);
  out.set_name(t.name());
  if (t.is_host()) {
    copy_from_host(out, t.device_data());
  } else if (t.owner() == backend) {
    backend->copy(*out.buffer(), out.offset(), *t.buffer(), t.offset(), t.bytes());
  } else {  // between two devices: through the host (counted by both)
    const Tensor host = to_host(t);
    copy_from_host(out, host.device_data());
  }
  return out;
}

const Tensor& host_view(const Tensor& t, Tensor& scratch) {
  if (t.is_host()) return t;
  scratch = to_host(t);
  return scratch;
}

void check_element_bytes(const Tensor& t, size_t bytes) {
  FRUGAL_CHECK(dtype_bytes(t.dtype()) == bytes,
               fmt::format("{} given elements of {} bytes", describe(t), bytes));
}

void keep_on(Tensor& t, Backend& backend) {
  const bool device = !backend.device().is_host();
  if (device ? t.owner() == &backend : t.is_host()) return;
  Tensor fresh(0, t.cols(), t.dtype(), backend);
  fresh.set_name(t.name());
  t = std::move(fresh);
}

void copy_rows(Tensor& dst, size_t dst_row, const Tensor& src, size_t src_row, size_t count) {
  FRUGAL_CHECK(dst.cols() == src.cols() && dst.dtype() == src.dtype() && dst_row + count <= dst.rows() &&
                   src_row + count <= src.rows(),
               fmt::format("copy_rows: rows {}..{} of a {}x{} tensor into rows {}..{} of a {}x{} one", src_row,
                           src_row + count, src.rows(), src.cols(), dst_row, dst_row + count, dst.rows(), dst.cols()));
  const size_t row_bytes = src.cols() * dtype_bytes(src.dtype()), bytes = count * row_bytes;
  if (bytes == 0) return;
  if (dst.is_host() && src.is_host()) {
    std::memmove(dst.device_data() + dst_row * row_bytes, src.device_data() + src_row * row_bytes, bytes);
    return;
  }
  Backend* backend = dst.owner() != nullptr ? dst.owner() : src.owner();
  FRUGAL_CHECK(dst.is_host() || src.is_host() || dst.owner() == src.owner(),
               fmt::format("copy_rows: from {} to {}", src.device().name(), dst.device().name()));
  backend->copy(*dst.buffer(), dst.offset() + dst_row * row_bytes, *src.buffer(), src.offset() + src_row * row_bytes,
                bytes);
}

void place_on(Tensor& t, Backend* backend) {
  if (backend != nullptr && !backend->device().is_host()) {
    if (t.owner() != backend) t = to_backend(t, backend);
  } else if (!t.is_host()) {
    t = to_host(t);
  }
}

Tensor converted(const Tensor& src, Dtype dtype) {
  Tensor out(0, 0, dtype);
  out.assign(src);
  return out;
}

}  // namespace frugal
