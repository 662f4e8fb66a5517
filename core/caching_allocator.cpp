#include "core/caching_allocator.h"

#include <utility>

namespace frugal {

namespace {
constexpr size_t kSmallStep = 512, kLargeStep = size_t{2} << 20, kLargeFrom = size_t{1} << 20;
}  // namespace

CachingAllocator::CachingAllocator(std::function<void*(size_t)> raw_alloc, std::function<void(void*)> raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::rounded(size_t bytes) {
  const size_t step = bytes < kLargeFrom ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::Block CachingAllocator::acquire(size_t bytes) {
  if (bytes == 0) return {};
  const size_t size = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.lower_bound(size);
    if (it != cache_.end() && it->first <= 2 * size) {
      const Block b{it->second, it->first};
      cache_.erase(it);
      ++stats_.reuses;
      stats_.cached_bytes -= b.bytes;
      stats_.in_use_bytes += b.bytes;
      return b;
    }
  }
  void* p = nullptr;
  try {
    p = raw_alloc_(size);
  } catch (...) {
    // No room: what the cache holds may be enough once it goes back to the device.
    empty_cache();
    p = raw_alloc_(size);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.device_allocations;
  stats_.in_use_bytes += size;
  return {p, size};
}

void CachingAllocator::release(Block b) noexcept {
  if (b.p == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.emplace(b.bytes, b.p);
  stats_.in_use_bytes -= b.bytes;
  stats_.cached_bytes += b.bytes;
}

void CachingAllocator::empty_cache() noexcept {
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(cache_);
    stats_.cached_bytes = 0;
  }
  for (const auto& [bytes, p] : blocks) raw_free_(p);
}

namespace {
class CachedBuffer final : public Buffer {
 public:
  CachedBuffer(Device device, std::shared_ptr<CachingAllocator> memory, CachingAllocator::Block block, Backend* owner)
      : Buffer(device, static_cast<std::byte*>(block.p), block.bytes, owner), memory_(std::move(memory)),
        block_(block) {}
  ~CachedBuffer() override { memory_->release(block_); }

 private:
  std::shared_ptr<CachingAllocator> memory_;
  CachingAllocator::Block block_;
};
}  // namespace

std::shared_ptr<Buffer> make_cached_buffer(Device device, std::shared_ptr<CachingAllocator> memory, size_t bytes,
                                           Backend* owner) {
  const CachingAllocator::Block block = memory->acquire(bytes);
  return std::make_shared<CachedBuffer>(device, std::move(memory), block, owner);
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace frugal
