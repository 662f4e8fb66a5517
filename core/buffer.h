// Buffer: a block of memory owned by the backend that computes on it (ggml's backend buffers,
// PyTorch's device allocations). A Tensor (core/tensor.h) is a view of a buffer; where its bytes
// live is the buffer's business:
//  - host buffers: plain host memory, 64-byte aligned, on huge pages from kHugePagesFrom up
//    (core/huge_pages.h). Host code reads and writes them directly; the CPU backend computes on them
//    and pays nothing for the abstraction.
//  - device buffers: memory the host may not touch (a GPU's, or the counting device's of
//    kernels/emulated_backend.h). Only the owning backend dereferences base(); host code moves bytes
//    in and out with the backend's set / get / copy (core/backend.h), which count what crosses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace frugal {

class Backend;

enum class DeviceKind : uint8_t { host, cuda, emulated };

struct Device {
  DeviceKind kind = DeviceKind::host;
  int index = 0;  // which device of its kind (0 for the host)
  bool is_host() const { return kind == DeviceKind::host; }
  // "host", "cuda:0", "emulated:0": as errors and logs name it.
  std::string name() const;
  friend bool operator==(const Device&, const Device&) = default;
};

class Buffer {
 public:
  // owner: the backend whose set / get / copy move this buffer's bytes (null for host memory, which
  // any code may copy with memcpy).
  Buffer(Device device, std::byte* base, size_t bytes, Backend* owner)
      : device_(device), base_(base), bytes_(bytes), owner_(owner) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device device() const { return device_; }
  // Whether host code may read and write the bytes at base().
  bool is_host() const { return device_.is_host(); }
  size_t bytes() const { return bytes_; }
  // The memory's address on its device: host code dereferences it only when is_host(); a backend
  // dereferences its own buffers' (device pointers, or the counting device's host memory).
  std::byte* base() const { return base_; }
  Backend* owner() const { return owner_; }

 private:
  Device device_;
  std::byte* base_;
  size_t bytes_;
  Backend* owner_;
};

// `bytes` of host memory (uninitialized), 64-byte aligned, huge pages for big arrays.
std::shared_ptr<Buffer> alloc_host_buffer(size_t bytes);
// Host memory owned elsewhere (a data loader's vector, a kernel's scratch), seen as a buffer for
// the length of a call: never freed here, and it must outlive every tensor viewing it.
std::shared_ptr<Buffer> wrap_host_memory(void* p, size_t bytes);
// Throws frugal::Error naming `who` (a backend's name and op) when [offset, offset + bytes) is not
// inside b: every backend's set / get / copy / clear checks its ranges so.
void check_buffer_range(const Buffer& b, size_t offset, size_t bytes, std::string_view who);

}  // namespace frugal
