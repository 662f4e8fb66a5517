#include "core/buffer.h"

#include <new>

#include <fmt/format.h>

#include "core/huge_pages.h"
#include "core/tensor.h"

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

constexpr size_t kAlign = Tensor::kStampBytes;
static_assert(sizeof(TensorStamp) <= kAlign);

// Host memory with a TensorStamp in the kAlign bytes in front of the data. Big buffers (weights,
// optimizer moments, row-sparse gradients) are read a sampled row at a time: their memory is on
// huge pages (core/huge_pages.h).
class HostBuffer final : public Buffer {
 public:
  HostBuffer(std::byte* base, size_t bytes) : Buffer(Device{}, base, bytes, nullptr) {}
  ~HostBuffer() override {
    if (base() == nullptr) return;
    TensorStamp* s = stamp();
    if (s->mirrored.load(std::memory_order_acquire)) forget_device_copies(base());
    s->~TensorStamp();
    free_for_random_access(base() - kAlign);
  }
  TensorStamp* stamp() const override {
    return base() != nullptr ? std::launder(reinterpret_cast<TensorStamp*>(base() - kAlign)) : nullptr;
  }
};

}  // namespace

std::shared_ptr<Buffer> alloc_host_buffer(size_t bytes) {
  if (bytes == 0) return std::make_shared<HostBuffer>(nullptr, 0);
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = allocate_for_random_access(kAlign + rounded, kAlign);
  new (p) TensorStamp();
  return std::make_shared<HostBuffer>(static_cast<std::byte*>(p) + kAlign, rounded);
}

std::shared_ptr<Buffer> wrap_host_memory(void* p, size_t bytes) {
  return std::make_shared<Buffer>(Device{}, static_cast<std::byte*>(p), bytes, nullptr);
}

}  // namespace frugal
