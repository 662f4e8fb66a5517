// Internal: a received or outgoing frame. The payload is shared, read-only memory owned by
// whatever produced it (a std::vector for sends and in-process delivery, a ZeroMQ message for
// TCP receives), so large messages are not copied on their way through the library.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "comm/frame.h"
#include "comm/peer_quota.h"

namespace frugal::comm::detail {

class Payload {
 public:
  Payload() = default;
  Payload(std::shared_ptr<const void> owner, const std::byte* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  static Payload from(std::vector<std::byte> bytes) {
    auto v = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
    const std::byte* d = v->data();
    const size_t n = v->size();
    return Payload(std::move(v), d, n);
  }
  static Payload copy_of(std::span<const std::byte> bytes) {
    return from(std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

struct Message {
  FrameHeader header;
  Payload payload;
  bool payload_checked = false;  // in-process delivery needs no checksum
  QuotaHold quota{};             // what this frame counts against its sender's share (ZeroMQ)
};

}  // namespace frugal::comm::detail
