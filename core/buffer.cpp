#include "core/buffer.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/huge_pages.h"

namespace frugal {

std::string Device::name() const {
  switch (kind) {
    case DeviceKind::host: return "host";
    case DeviceKind::cuda: return fmt::format("cuda:{}", index);
    case DeviceKind::emulated: return fmt::format("emulated:{}", index);
  }
  return "?";
}

namespace {

constexpr size_t kAlign = 64;  // a cache line, and every SIMD width the kernels use

// Host memory, kAlign-aligned. Big buffers (weights, optimizer moments, row-sparse gradients) are
// read a sampled row at a time: their memory is on huge pages (core/huge_pages.h).
class HostBuffer final : public Buffer {
 public:
  HostBuffer(std::byte* base, size_t bytes) : Buffer(Device{}, base, bytes, nullptr) {}
  ~HostBuffer() override {
    if (base() != nullptr) free_for_random_access(base());
  }
};

}  // namespace

std::shared_ptr<Buffer> alloc_host_buffer(size_t bytes) {
  if (bytes == 0) return std::make_shared<HostBuffer>(nullptr, 0);
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  return std::make_shared<HostBuffer>(static_cast<std::byte*>(allocate_for_random_access(rounded, kAlign)), rounded);
}

void check_buffer_range(const Buffer& b, size_t offset, size_t bytes, std::string_view who) {
  FRUGAL_CHECK(offset <= b.bytes() && bytes <= b.bytes() - offset,
               fmt::format("{}: bytes [{}, {}) of a buffer of {}", who, offset, offset + bytes, b.bytes()));
}

std::shared_ptr<Buffer> wrap_host_memory(void* p, size_t bytes) {
  return std::make_shared<Buffer>(Device{}, static_cast<std::byte*>(p), bytes, nullptr);
}

}  // namespace frugal
