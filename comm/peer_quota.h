// Internal: how many bytes each peer has made this rank hold. A frame received from a peer waits in
// a mailbox until the operation that needs it takes it; a peer that runs far ahead, or a flood of
// frames that no operation will ever take (another collective, another communicator id), would
// make the rank allocate without bound. The ZeroMQ transport charges every received frame to its
// sender here and fails the run, naming the peer and the limit, when one peer's share exceeds it.
// Legitimate traffic stays far below: a peer is at most about one collective ahead, and
// collectives send their data in segments (CollectiveTuning::segment_bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace frugal::comm::detail {

class PeerQuota;

// The charge of one received frame; released when the frame is destroyed (taken and used, or
// dropped with its mailbox). Movable, not copyable.
class QuotaHold {
 public:
  QuotaHold() = default;
  QuotaHold(std::shared_ptr<PeerQuota> quota, int peer, int64_t bytes)
      : quota_(std::move(quota)), peer_(peer), bytes_(bytes) {}
  QuotaHold(QuotaHold&& o) noexcept { swap(o); }
  QuotaHold& operator=(QuotaHold&& o) noexcept {
    QuotaHold tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  QuotaHold(const QuotaHold&) = delete;
  QuotaHold& operator=(const QuotaHold&) = delete;
  ~QuotaHold();

 private:
  void swap(QuotaHold& o) noexcept {
    std::swap(quota_, o.quota_);
    std::swap(peer_, o.peer_);
    std::swap(bytes_, o.bytes_);
  }
  std::shared_ptr<PeerQuota> quota_;
  int peer_ = 0;
  int64_t bytes_ = 0;
};

class PeerQuota : public std::enable_shared_from_this<PeerQuota> {
 public:
  // Every frame is charged its payload plus this, for the header and the bookkeeping around it,
  // so a flood of empty frames is bounded too.
  static constexpr int64_t kFrameOverhead = 256;

  PeerQuota(int world_size, int64_t limit_bytes) : held_(world_size, 0), limit_(limit_bytes) {}

  // Charges a frame of `payload_bytes` from `peer`; false (nothing charged) when the peer's share
  // would exceed the limit.
  bool charge(int peer, int64_t payload_bytes, QuotaHold& hold);
  int64_t held(int peer) const;
  int64_t limit() const { return limit_; }

 private:
  friend class QuotaHold;
  void release(int peer, int64_t bytes);

  mutable std::mutex mutex_;
  std::vector<int64_t> held_;
  const int64_t limit_;
};

}  // namespace frugal::comm::detail
