// Internal: what the collective algorithms need from a network — ordered delivery of frames to a
// world rank — plus the routing of incoming frames to the mailbox of their communicator. Local
// (threads) and ZeroMQ (TCP) implement it; MPI does not use it (it has its own collectives).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/comm_stats.h"
#include "comm/mailbox.h"
#include "comm/message.h"

namespace frugal::comm::detail {

class Transport {
 public:
  Transport(int world_rank, int world_size);
  virtual ~Transport() = default;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  virtual std::string_view name() const = 0;

  // Queues a frame for world rank `dst` (not this rank); frames to one destination arrive in the
  // order they were sent. Never blocks on the network. Returns the bytes it will put on the wire.
  virtual uint64_t send(int dst, const FrameHeader& header, Payload payload) = 0;
  // Whether every payload given to send() is released soon after it has gone to the wire, and at
  // the latest when its peer is gone (said goodbye, or declared dead): then collectives send the
  // caller's own memory without a copy (SendLoans) and wait for it before they complete. In-process
  // delivery keeps a payload in the receiver's mailbox until an operation takes it, which a failed
  // receiver never does: it copies.
  virtual bool releases_sent_payloads() const { return false; }

  // Receiving on the thread that waits. A thread that runs collectives claims the network while it
  // runs them (claim_receive .. release_receive): while any thread holds a claim, the transport's
  // own thread leaves incoming frames to the claimants, so a frame reaches the waiting operation
  // with no hand-off. A claimant waiting for a frame calls poll_incoming for up to receive_spin,
  // then releases its claim before it sleeps on its mailbox (so that frames are delivered to it),
  // and claims again once woken. receive_spin() is zero when frames reach the mailboxes on their
  // own (in-process delivery): then nothing is claimed.
  virtual std::chrono::microseconds receive_spin() const { return std::chrono::microseconds(0); }
  virtual void claim_receive() {}
  virtual void release_receive() {}
  // Takes what has arrived from the network into the mailboxes on the calling thread, without
  // blocking (another thread may be doing it already).
  virtual void poll_incoming() {}

  // The mailbox of a communicator, created on first use (frames may arrive before the local rank
  // has created the communicator, e.g. right after a split).
  std::shared_ptr<Mailbox> mailbox(uint64_t comm_id);
  void release(uint64_t comm_id);

  // Routes an incoming, header-checked frame: collective and p2p frames to their mailbox, aborts
  // fail their communicator, goodbyes mark the sender as gone.
  void deliver(Message m);
  // The transport is broken (a peer is unreachable): fails every communicator, now and later.
  void fail_all(const std::string& reason);
  void peer_left(int src, const std::string& reason);
  std::string failure() const;

  // Heartbeats, aborts and goodbyes, by peer world rank; merged into the world communicator's stats.
  StatsCounter& control_stats() { return control_; }

 private:
  const int world_rank_;
  const int world_size_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Mailbox>> mailboxes_;
  std::string failure_;
  std::vector<std::string> gone_;
  StatsCounter control_;
};

}  // namespace frugal::comm::detail
