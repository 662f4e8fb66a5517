#include "comm/mailbox.h"

#include <fmt/format.h>

#include "core/comm_stats.h"

namespace frugal::comm::detail {
namespace {

std::string mismatch(const OpInfo& mine, const FrameHeader& h) {
  const auto theirs = to_string(static_cast<OpKind>(h.op));
  return fmt::format("collective mismatch: this rank's collective #{} is {}, but rank {} sent a "
                     "frame of {} as its collective #{}{} (every rank must issue the same "
                     "collectives, with the same sizes and arguments, in the same order)",
                     mine.seq, mine.description, h.src, theirs, h.seq,
                     h.seq == mine.seq ? " with other arguments or kind" : "");
}

}  // namespace

Mailbox::Mailbox(int world_size) : collective_(world_size), gone_(world_size) {}

void Mailbox::deliver(Message m) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return;  // nobody will take it
    const int src = static_cast<int>(m.header.src);
    if (m.header.kind == FrameKind::p2p) {
      p2p_[{src, m.header.step}].push_back(std::move(m));
    } else {
      auto& q = collective_[src];
      q.push_back(std::move(m));
      if (q.size() == 1) check_head_locked(src);
    }
  }
  cv_.notify_all();
}

// A frame at the head of a queue that belongs to the running collective but has another signature,
// or to a collective this rank already finished, can never be taken: fail now rather than hang.
void Mailbox::check_head_locked(int src) {
  const auto& q = collective_[src];
  if (q.empty() || current_.seq == 0 || !failure_.empty()) return;
  const FrameHeader& h = q.front().header;
  if ((h.seq == current_.seq && h.sig != current_.sig) || h.seq < current_.seq) {
    failure_ = mismatch(current_, h);
    if (!q.front().payload_checked) {  // a damaged frame is reported as that, not as a mismatch
      try {
        check_payload(h, q.front().payload.bytes());
      } catch (const FrameError& e) {
        failure_ = e.what();
      }
    }
  }
}

void Mailbox::begin(const OpInfo& op) {
  {
    std::lock_guard lock(mutex_);
    current_ = op;
    for (size_t s = 0; s < collective_.size(); ++s) check_head_locked(static_cast<int>(s));
  }
  cv_.notify_all();
}

void Mailbox::throw_failure_locked() const { throw CommError(failure_); }

Message Mailbox::take_collective(int src, const OpInfo& op, uint32_t step, uint32_t part) {
  std::unique_lock lock(mutex_);
  auto& q = collective_[src];
  cv_.wait(lock, [&] { return !failure_.empty() || !q.empty() || !gone_[src].empty(); });
  if (!failure_.empty()) throw_failure_locked();
  if (q.empty()) {
    failure_ = fmt::format("{} while this rank waited for it in collective #{} ({})", gone_[src],
                           op.seq, op.description);
    cv_.notify_all();
    throw_failure_locked();
  }
  Message m = std::move(q.front());
  q.pop_front();
  lock.unlock();
  // A damaged frame is reported as such, before asking whether it was the expected one.
  if (!m.payload_checked) {
    try {
      check_payload(m.header, m.payload.bytes());
    } catch (const FrameError& e) {
      fail(e.what());
      throw;
    }
  }
  const FrameHeader& h = m.header;
  if (h.seq != op.seq || h.sig != op.sig) {
    fail(mismatch(op, h));
    throw CommError(failure());
  }
  if (h.step != step || h.part != part) {
    fail(fmt::format("protocol error: in collective #{} ({}) expected step {} part {} from rank {}, "
                     "got step {} part {}", op.seq, op.description, step, part, src, h.step, h.part));
    throw CommError(failure());
  }
  return m;
}

bool Mailbox::collective_ready(int src) const {
  std::lock_guard lock(mutex_);
  return !failure_.empty() || !collective_[src].empty() || !gone_[src].empty();
}

bool Mailbox::p2p_ready(int src, uint32_t tag) const {
  std::lock_guard lock(mutex_);
  const auto it = p2p_.find({src, tag});
  return !failure_.empty() || (it != p2p_.end() && !it->second.empty()) || !gone_[src].empty();
}

Message Mailbox::take_p2p(int src, uint32_t tag) {
  std::unique_lock lock(mutex_);
  const auto key = std::make_pair(src, tag);
  cv_.wait(lock, [&] {
    auto it = p2p_.find(key);
    return !failure_.empty() || (it != p2p_.end() && !it->second.empty()) || !gone_[src].empty();
  });
  if (!failure_.empty()) throw_failure_locked();
  auto it = p2p_.find(key);
  if (it == p2p_.end() || it->second.empty()) {
    throw CommError(fmt::format("{} while this rank waited for a message with tag {}", gone_[src],
                                tag));
  }
  Message m = std::move(it->second.front());
  it->second.pop_front();
  lock.unlock();
  if (!m.payload_checked) check_payload(m.header, m.payload.bytes());
  return m;
}

bool Mailbox::fail(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return false;
    failure_ = reason;
    for (auto& q : collective_) q.clear();  // releases what the frames held
    p2p_.clear();
  }
  cv_.notify_all();
  return true;
}

void Mailbox::peer_left(int src, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    gone_[src] = reason;
  }
  cv_.notify_all();
}

std::string Mailbox::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace frugal::comm::detail
