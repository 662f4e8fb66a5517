#include "comm/transport_communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace frugal::comm::detail {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t signature(const std::vector<uint64_t>& words) {
  uint64_t h = 0x84222325cbf29ce4ULL;
  for (uint64_t w : words) h = mix64(h ^ w);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

}  // namespace

TransportCommunicator::TransportCommunicator(std::shared_ptr<Transport> transport,
                                             std::vector<int> members, uint64_t comm_id,
                                             Tuning tuning)
    : transport_(std::move(transport)),
      members_(std::move(members)),
      comm_id_(comm_id),
      tuning_(tuning),
      mailbox_(transport_->mailbox(comm_id)),
      stats_(static_cast<int>(members_.size())) {
  const auto me = std::find(members_.begin(), members_.end(), transport_->world_rank());
  FRUGAL_CHECK(me != members_.end(), "TransportCommunicator: this rank is not a member");
  rank_ = static_cast<int>(me - members_.begin());
  collectives_.thread = std::thread([this] { run(collectives_, true); });
  receives_.thread = std::thread([this] { run(receives_, false); });
}

TransportCommunicator::~TransportCommunicator() {
  for (Queue* q : {&collectives_, &receives_}) {
    std::lock_guard lock(q->mutex);
    q->stop = true;
  }
  // Operations still queued or running would wait for frames forever: end them (and tell peers).
  mailbox_->fail(fmt::format("the communicator was destroyed on rank {} while operations were "
                             "pending", rank_));
  for (Queue* q : {&collectives_, &receives_}) {
    q->cv.notify_all();
    q->thread.join();
  }
  transport_->release(comm_id_);
}

Work TransportCommunicator::submit(OpKind kind, std::string description,
                                   std::vector<uint64_t> sig_words,
                                   std::function<void(const Op&)> body) {
  const bool collective = kind != OpKind::point_to_point;
  sig_words.push_back(static_cast<uint64_t>(kind));
  Op op{OpInfo{0, signature(sig_words), std::move(description)}, kind, std::move(body),
        std::make_shared<WorkState>()};
  Work work(op.state);
  Queue& q = collective ? collectives_ : receives_;
  {
    std::lock_guard lock(q.mutex);
    if (collective) op.info.seq = next_seq_++;
    q.ops.push_back(std::move(op));
  }
  q.cv.notify_one();
  return work;
}

bool TransportCommunicator::spin_until(const std::function<bool()>& ready) {
  const auto spin = transport_->receive_spin();
  if (ready()) return true;
  if (spin.count() == 0) return false;
  const auto until = std::chrono::steady_clock::now() + spin;
  do {
    transport_->poll_incoming();
    if (ready()) return true;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

void TransportCommunicator::run(Queue& q, bool collective) {
  set_error_rank(transport_->world_rank());
  // Each thread claims the network while it runs operations (Transport::claim_receive) and keeps
  // the claim for kClaimLinger after the last one, since the next often follows at once.
  const bool claims = transport_->receive_spin().count() > 0;
  bool claimed = false;
  for (;;) {
    std::unique_lock lock(q.mutex);
    auto ready = [&] { return q.stop || !q.ops.empty(); };
    if (claimed && !q.cv.wait_for(lock, kClaimLinger, ready)) {
      transport_->release_receive();
      claimed = false;
    }
    q.cv.wait(lock, ready);
    if (q.ops.empty()) {
      if (claimed) transport_->release_receive();
      return;
    }
    Op op = std::move(q.ops.front());
    q.ops.pop_front();
    lock.unlock();
    if (claims && !claimed) {
      transport_->claim_receive();
      claimed = true;
    }
    const std::string where = fmt::format("{}{} failed on rank {} of {} ({})", op.info.description,
                                          collective ? fmt::format(" (collective #{})", op.info.seq)
                                                     : std::string(),
                                          rank_, size(), transport_->name());
    std::string failure = mailbox_->failure();
    if (failure.empty()) {
      try {
        if (collective) mailbox_->begin(op.info);
        op.body(op);
        // The caller's memory that frames still carry must be back before the caller may change it
        // (only collectives lend: the point-to-point thread has nothing to wait for).
        if (collective) loans_.wait_returned();
        op.state->complete();
        continue;
      } catch (const std::exception& e) {
        failure = e.what();
        abort(failure);
      }
    }
    // Also on failure: what was lent is released as it leaves, or when the transport drops the
    // link to a dead peer.
    if (collective) loans_.wait_returned();
    op.state->fail(std::make_exception_ptr(CommError(fmt::format("{}: {}", where, failure))));
  }
}

void TransportCommunicator::abort(const std::string& reason) {
  mailbox_->fail(reason);
  const std::string text = mailbox_->failure();
  FrameHeader h;
  h.kind = FrameKind::abort;
  h.src = static_cast<uint32_t>(transport_->world_rank());
  h.comm_id = comm_id_;
  h.op = static_cast<uint8_t>(OpKind::control);
  for (int p = 0; p < size(); ++p) {
    if (p == rank_) continue;
    const auto* b = reinterpret_cast<const std::byte*>(text.data());
    const uint64_t n = transport_->send(members_[p], h, Payload::copy_of({b, text.size()}));
    transport_->control_stats().add_sent(OpKind::control, members_[p], n);
  }
}

std::unique_ptr<Communicator> TransportCommunicator::split(int color, int key) {
  std::vector<std::vector<std::byte>> all;
  int32_t mine[2] = {color, key};
  const auto* b = reinterpret_cast<const std::byte*>(mine);
  uint64_t seq = 0;
  Work w = submit(OpKind::split, "split", {}, [&, this](const Op& op) {
    seq = op.info.seq;
    exchange_bytes(op, {b, sizeof mine}, all);
  });
  w.wait();
  if (color < 0) return nullptr;
  struct Entry {
    int key, rank;
  };
  std::vector<Entry> group;
  for (int r = 0; r < size(); ++r) {
    int32_t ck[2];
    FRUGAL_CHECK(all[r].size() == sizeof ck, "split: malformed (color, key) from a peer");
    std::memcpy(ck, all[r].data(), sizeof ck);
    if (ck[0] == color) group.push_back({ck[1], r});
  }
  std::stable_sort(group.begin(), group.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  std::vector<int> members;
  for (const Entry& e : group) members.push_back(members_[e.rank]);
  // Every member computes the same id from (parent, split number, color), with no extra exchange.
  const uint64_t id = mix64(mix64(comm_id_ ^ 0x5157) ^ seq) ^ mix64(static_cast<uint64_t>(color) + 1);
  return std::make_unique<TransportCommunicator>(transport_, std::move(members), id, tuning_);
}

Work TransportCommunicator::send(int dst, int tag, std::span<const std::byte> bytes) {
  FRUGAL_CHECK(dst >= 0 && dst < size(), fmt::format("send: destination {} is not a rank of this "
                                                     "{}-rank communicator", dst, size()));
  FRUGAL_CHECK(tag >= 0, fmt::format("send: tag {} is negative", tag));
  const std::string failure = mailbox_->failure();
  if (!failure.empty()) {
    throw CommError(fmt::format("send to rank {} failed on rank {}: {}", dst, rank_, failure));
  }
  FrameHeader h;
  h.kind = FrameKind::p2p;
  h.op = static_cast<uint8_t>(OpKind::point_to_point);
  h.src = static_cast<uint32_t>(transport_->world_rank());
  h.step = static_cast<uint32_t>(tag);
  h.comm_id = comm_id_;
  h.payload_bytes = bytes.size();
  if (dst == rank_) {
    mailbox_->deliver({h, Payload::copy_of(bytes), true});
    return Work();
  }
  const uint64_t n = transport_->send(members_[dst], h, Payload::copy_of(bytes));
  stats_.add_sent(OpKind::point_to_point, dst, n);
  return Work();
}

Work TransportCommunicator::recv(int src, int tag, std::vector<std::byte>& out) {
  FRUGAL_CHECK(src >= 0 && src < size(), fmt::format("recv: source {} is not a rank of this "
                                                     "{}-rank communicator", src, size()));
  FRUGAL_CHECK(tag >= 0, fmt::format("recv: tag {} is negative", tag));
  return submit(OpKind::point_to_point, fmt::format("recv(from rank {}, tag {})", src, tag), {},
                [this, src, tag, &out](const Op&) {
                  const int from = members_[src];
                  const auto t = static_cast<uint32_t>(tag);
                  Message m;
                  if (spin_until([&] { return mailbox_->p2p_ready(from, t); })) {
                    m = mailbox_->take_p2p(from, t);
                  } else {
                    SleepingReceiver sleeping(*transport_);
                    m = mailbox_->take_p2p(from, t);
                  }
                  if (src != rank_) {
                    stats_.add_received(OpKind::point_to_point, src,
                                        kFrameHeaderBytes + m.payload.size());
                  }
                  const auto b = m.payload.bytes();
                  out.assign(b.begin(), b.end());
                });
}

CommStats TransportCommunicator::stats() const {
  CommStats s = stats_.snapshot();
  if (comm_id_ == 0) {  // the world communicator also owns the transport's own traffic
    const CommStats c = transport_->control_stats().snapshot();
    s.by_kind[static_cast<size_t>(OpKind::control)] += c.kind(OpKind::control);
    for (size_t p = 0; p < s.by_peer.size() && p < c.by_peer.size(); ++p) s.by_peer[p] += c.by_peer[p];
  }
  return s;
}

void TransportCommunicator::reset_stats() {
  stats_.reset();
  if (comm_id_ == 0) transport_->control_stats().reset();
}

}  // namespace frugal::comm::detail
