// CachingAllocator: device memory kept for reuse, PyTorch's CUDA caching allocator in miniature. A
// device backend's buffers come from it: a freed block goes back to a cache by size, and the next
// request that fits takes it, so a training step that frees and makes the same tensors every step
// allocates nothing from the device after the first (cudaMalloc and cudaFree synchronize the whole
// device and cost as much as a small kernel each).
//
// Sizes are rounded (512 B steps below 1 MiB, 2 MiB steps above) and a request takes the smallest
// cached block of at least its rounded size and at most twice it. A request the device cannot
// meet frees the whole cache and tries once more. Blocks are reused in the order of one stream: a
// block released while queued work still uses it is handed out only to work queued after it, which
// is why a backend with one stream needs no events here. Thread-safe (one mutex, taken per
// allocation and release, never per op).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "core/buffer.h"

namespace frugal {

class CachingAllocator {
 public:
  // raw_alloc(bytes) returns device memory or throws; raw_free releases it and never throws.
  CachingAllocator(std::function<void*(size_t)> raw_alloc, std::function<void(void*)> raw_free);
  ~CachingAllocator();  // frees every cached block (blocks in use must have been released)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  struct Block {
    void* p = nullptr;
    size_t bytes = 0;  // the rounded size, at least the request
  };
  Block acquire(size_t bytes);     // bytes 0: an empty block (no memory)
  void release(Block b) noexcept;  // back to the cache
  // Frees every cached block (not the ones in use).
  void empty_cache() noexcept;

  struct Stats {
    uint64_t device_allocations = 0;  // raw_alloc calls so far
    uint64_t reuses = 0;              // requests met from the cache
    size_t in_use_bytes = 0, cached_bytes = 0;
  };
  Stats stats() const;

  // The size a request is rounded to.
  static size_t rounded(size_t bytes);

 private:
  std::function<void*(size_t)> raw_alloc_;
  std::function<void(void*)> raw_free_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cache_;  // free blocks by size
  Stats stats_;
};

// A device buffer of `bytes` from `memory` (a block of it; none for 0 bytes), owned by `owner`, on
// `device`; the block goes back to the cache when the last tensor viewing the buffer goes.
std::shared_ptr<Buffer> make_cached_buffer(Device device, std::shared_ptr<CachingAllocator> memory, size_t bytes,
                                           Backend* owner);

}  // namespace frugal
