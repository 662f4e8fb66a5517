#include "comm/peer_quota.h"

namespace frugal::comm::detail {

QuotaHold::~QuotaHold() {
  if (quota_) quota_->release(peer_, bytes_);
}

bool PeerQuota::charge(int peer, int64_t payload_bytes, QuotaHold& hold) {
  const int64_t bytes = payload_bytes + kFrameOverhead;
  {
    std::lock_guard lock(mutex_);
    if (held_[peer] + bytes > limit_) return false;
    held_[peer] += bytes;
  }
  hold = QuotaHold(shared_from_this(), peer, bytes);
  return true;
}

int64_t PeerQuota::held(int peer) const {
  std::lock_guard lock(mutex_);
  return held_[peer];
}

void PeerQuota::release(int peer, int64_t bytes) {
  std::lock_guard lock(mutex_);
  held_[peer] -= bytes;
}

}  // namespace frugal::comm::detail
