// DeviceMirror: the copies a device backend keeps of host tensors (weights, optimizer state) on its
// device, so that a training step moves only activations and gradients, not the model.
//
// The host tensor stays the reference copy; the mirror decides when it and the device copy must be
// brought together:
//  - host -> device: a device copy is refreshed (the whole tensor) before an op uses it when the
//    host changed the tensor since (TensorStamp::host_written, set by every non-const access), e.g.
//    after initialization, a checkpoint load or a reslice. A host that never writes costs nothing.
//  - device -> host: an op that changed rows of a device copy says so. Weights are written through
//    (the backend copies the changed rows back in the same op: evaluation, checkpoints and LSH
//    rebuilds read them on the host); optimizer moments stay ahead on the device until flush(),
//    which Optimizer::state() calls (through Backend::flush_state()) before anything on the host reads
//    or replaces them.
// A host write to a tensor whose device copy is ahead is a broken protocol (one of the two sets of
// changes would be lost): acquire() throws naming the tensor's shape instead of choosing one.
//
// The device memory is the backend's (Memory below): gpu/ implements it with CUDA, and the tests run
// the whole protocol with host memory standing in for the device (tests/kernels/mirror_backend.h),
// where a forgotten flush or a stale copy changes the training's bits. Entries are found by the host
// data's address and dropped when that data is freed (Tensor's deleter calls forget_device_copies).
// Thread-safe: one mutex per mirror.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>

#include "core/tensor.h"

namespace frugal {

class DeviceMirror {
 public:
  // A backend's device memory. upload and download return when the copy is done.
  class Memory {
   public:
    virtual ~Memory() = default;
    // `bytes` of device memory for a copy of `like` (its shape and dtype; the simulated device of
    // the tests makes a Tensor of that shape). Throws when there is no room.
    virtual void* allocate(const Tensor& like, size_t bytes) = 0;
    virtual void release(void* device) noexcept = 0;
    virtual void upload(void* device, const void* host, size_t bytes) = 0;
    virtual void download(void* host, const void* device, size_t bytes) = 0;
  };

  // Bytes moved by the mirror itself (whole-tensor uploads and flushes); a backend's own row
  // copies (write-through) are its business.
  struct Traffic {
    uint64_t uploads = 0, uploaded_bytes = 0;
    uint64_t flushes = 0, flushed_bytes = 0;
  };

  explicit DeviceMirror(Memory& memory);
  ~DeviceMirror();  // releases every device copy (without flushing: call flush() first if needed)
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  // The device copy of t, made (or refreshed from the host) when there is none or the host wrote t
  // since; null for an empty tensor. Throws when the host wrote t while the device copy was ahead.
  void* acquire(const Tensor& t);
  // The device copy of t when a current one exists, else null (no upload): for ops whose input may
  // or may not be a model tensor (LSH codes of weights or of activations).
  const void* find(const Tensor& t);
  // The device address of host address p when [p, p + bytes) lies inside one current device copy,
  // else null: for ops that take raw pointers (Backend::matmul).
  const void* find_range(const void* p, size_t bytes);
  // After an op changed t's device copy: written_back says the op also wrote the changed rows to the
  // host (the host now has the device's values: its written mark is cleared); otherwise the device is
  // ahead until flush().
  void changed(const Tensor& t, bool written_back);
  // Writes every copy that is ahead back to its host tensor.
  void flush();
  // Device bytes held.
  size_t bytes() const;
  size_t entries() const;
  Traffic traffic() const;

  // Called by Tensor's deleter (through forget_device_copies) when host data a mirror holds is freed.
  void forget(const void* data) noexcept;

 private:
  struct Entry {
    void* device = nullptr;
    size_t bytes = 0;
    size_t rows = 0, cols = 0;
    Dtype dtype = Dtype::f32;
    const TensorStamp* stamp = nullptr;  // the host data's (it lives as long as the entry)
    bool ahead = false;  // the device has changes the host has not seen
  };
  // The entry of t, checked against t's shape: a tensor resized in place may keep its address.
  Entry* lookup(const Tensor& t);
  void drop(std::unordered_map<const void*, Entry>::iterator it) noexcept;

  Memory& memory_;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Entry> entries_;  // by host data address
  size_t bytes_ = 0;
  Traffic traffic_;
};

}  // namespace frugal
