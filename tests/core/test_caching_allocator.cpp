// core/caching_allocator.h on host memory standing in for a device: blocks come back from the cache
// by size, a step that makes the same sizes again allocates nothing, a request the device cannot
// meet empties the cache and tries once more.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

#include "core/caching_allocator.h"

using namespace frugal;

namespace {
// Host memory as the device, with a limit on what it holds at once and a count of live blocks.
struct FakeDevice {
  size_t limit = size_t{1} << 30, held = 0;
  std::set<void*> live;
  std::map<void*, size_t> sizes;
  CachingAllocator allocator{[this](size_t bytes) {
                               if (held + bytes > limit) throw std::runtime_error("no room");
                               void* p = std::malloc(bytes);
                               held += bytes;
                               live.insert(p);
                               sizes[p] = bytes;
                               return p;
                             },
                             [this](void* p) {
                               held -= sizes.at(p);
                               live.erase(p);
                               std::free(p);
                             }};
};
}  // namespace

TEST_CASE("caching allocator: sizes are rounded, freed blocks are reused, a steady step allocates nothing") {
  CHECK(CachingAllocator::rounded(1) == 512);
  CHECK(CachingAllocator::rounded(512) == 512);
  CHECK(CachingAllocator::rounded(513) == 1024);
  CHECK(CachingAllocator::rounded((size_t{1} << 20) + 1) == (size_t{2} << 20));
  FakeDevice dev;
  CHECK(dev.allocator.acquire(0).p == nullptr);
  // A "step": three tensors made and freed.
  const auto step = [&] {
    const CachingAllocator::Block a = dev.allocator.acquire(1000), b = dev.allocator.acquire(300000),
                                  c = dev.allocator.acquire(5 << 20);
    CHECK(a.bytes >= 1000);
    CHECK(c.bytes >= (5u << 20));
    dev.allocator.release(b);
    dev.allocator.release(a);
    dev.allocator.release(c);
  };
  step();
  const uint64_t first = dev.allocator.stats().device_allocations;
  CHECK(first == 3);
  for (int i = 0; i < 5; ++i) step();
  CHECK(dev.allocator.stats().device_allocations == first);
  CHECK(dev.allocator.stats().reuses == 15);
  CHECK(dev.allocator.stats().in_use_bytes == 0);
  // A smaller request takes a cached block up to twice its size, not a far larger one.
  const CachingAllocator::Block small = dev.allocator.acquire(600);  // rounded 1024: takes the 1024 block
  CHECK(dev.allocator.stats().device_allocations == first);
  const CachingAllocator::Block tiny = dev.allocator.acquire(10);  // 512: nothing cached fits within 2x
  CHECK(dev.allocator.stats().device_allocations == first + 1);
  dev.allocator.release(small);
  dev.allocator.release(tiny);
  dev.allocator.empty_cache();
  CHECK(dev.live.empty());
  CHECK(dev.allocator.stats().cached_bytes == 0);
}

TEST_CASE("caching allocator: out of room, the cache goes back to the device and the request is tried again") {
  FakeDevice dev;
  dev.limit = size_t{8} << 20;
  dev.allocator.release(dev.allocator.acquire(6 << 20));  // 6 MiB cached
  // 4 MiB: the cached 6 MiB block is within twice the request, so it is reused.
  const CachingAllocator::Block reused = dev.allocator.acquire(4 << 20);
  CHECK(dev.allocator.stats().reuses == 1);
  dev.allocator.release(reused);
  // 2 MiB: the 6 MiB block is more than twice it, so a new block is asked for; 6 + 2 fits.
  const CachingAllocator::Block two = dev.allocator.acquire(2 << 20);
  // 7 MiB (8 rounded): does not fit beside the 8 MiB cached; the cache is emptied and it fits then.
  dev.allocator.release(two);
  const CachingAllocator::Block seven = dev.allocator.acquire(7 << 20);
  CHECK(seven.p != nullptr);
  CHECK(dev.held == seven.bytes);
  // Beyond the device: the device's error reaches the caller.
  CHECK_THROWS_WITH(dev.allocator.acquire(9 << 20), "no room");
  dev.allocator.release(seven);
}
