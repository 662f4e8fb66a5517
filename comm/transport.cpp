#include "comm/transport.h"

#include <string>

#include <fmt/format.h>

namespace frugal::comm::detail {

Transport::Transport(int world_rank, int world_size)
    : world_rank_(world_rank), world_size_(world_size), gone_(world_size), control_(world_size) {}

std::shared_ptr<Mailbox> Transport::mailbox(uint64_t comm_id) {
  std::lock_guard lock(mutex_);
  auto& mb = mailboxes_[comm_id];
  if (!mb) {
    mb = std::make_shared<Mailbox>(world_size_);
    if (!failure_.empty()) mb->fail(failure_);
    for (int r = 0; r < world_size_; ++r) {
      if (!gone_[r].empty()) mb->peer_left(r, gone_[r]);
    }
  }
  return mb;
}

void Transport::release(uint64_t comm_id) {
  std::lock_guard lock(mutex_);
  mailboxes_.erase(comm_id);
}

void Transport::deliver(Message m) {
  switch (m.header.kind) {
    case FrameKind::collective:
    case FrameKind::p2p: mailbox(m.header.comm_id)->deliver(std::move(m)); return;
    case FrameKind::abort: {
      const auto text = m.payload.bytes();
      mailbox(m.header.comm_id)
          ->fail(fmt::format("rank {} aborted: {}", m.header.src,
                             std::string_view(reinterpret_cast<const char*>(text.data()), text.size())));
      return;
    }
    case FrameKind::goodbye:
      peer_left(static_cast<int>(m.header.src),
                fmt::format("rank {} has shut down its communicator", m.header.src));
      return;
    default: return;  // heartbeats only prove liveness; rendezvous frames are handled before
  }
}

void Transport::fail_all(const std::string& reason) {
  std::vector<std::shared_ptr<Mailbox>> all;
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return;
    failure_ = reason;
    for (auto& [id, mb] : mailboxes_) all.push_back(mb);
  }
  for (auto& mb : all) mb->fail(reason);
}

void Transport::peer_left(int src, const std::string& reason) {
  std::vector<std::shared_ptr<Mailbox>> all;
  {
    std::lock_guard lock(mutex_);
    if (src < 0 || src >= world_size_) return;
    gone_[src] = reason;
    for (auto& [id, mb] : mailboxes_) all.push_back(mb);
  }
  for (auto& mb : all) mb->peer_left(src, reason);
}

std::string Transport::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace frugal::comm::detail
