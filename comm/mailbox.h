// Internal: where frames for one communicator wait until the operation that needs them asks.
// Collective frames queue per sender in arrival order; since every link keeps order and every rank
// runs the same algorithm, the frame at the head of a sender's queue must be exactly the one asked
// for — anything else means the ranks issued different collectives, which is reported at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/message.h"

namespace frugal::comm::detail {

// What a rank is doing on a communicator: the collective it is executing, for error messages.
struct OpInfo {
  uint64_t seq = 0;
  uint32_t sig = 0;
  std::string description;  // e.g. "all_reduce(sum, 1000 floats)"
};

class Mailbox {
 public:
  explicit Mailbox(int world_size);

  void deliver(Message m);
  // Blocks until the frame (src, seq, step, part) of the current collective is at the head of
  // src's queue; throws CommError when the communicator failed or the frame is not the expected one.
  Message take_collective(int src, const OpInfo& op, uint32_t step, uint32_t part);
  Message take_p2p(int src, uint32_t tag);
  // Whether take_collective(src, ...) would return (or throw) at once.
  bool collective_ready(int src) const;
  // Whether take_p2p(src, tag) would return (or throw) at once.
  bool p2p_ready(int src, uint32_t tag) const;

  // The executor announces each collective before it starts, so frames that arrived early from
  // a rank running another collective are caught even when nobody waits on that rank.
  void begin(const OpInfo& op);

  // Fails every current and later take; the first reason wins. Returns false if already failed.
  bool fail(const std::string& reason);
  // `src` left cleanly: takes that need a frame from it fail once its queue is empty.
  void peer_left(int src, const std::string& reason);
  // Empty when healthy.
  std::string failure() const;

 private:
  void check_head_locked(int src);
  [[noreturn]] void throw_failure_locked() const;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::deque<Message>> collective_;  // by sender's world rank
  std::map<std::pair<int, uint32_t>, std::deque<Message>> p2p_;
  std::vector<std::string> gone_;  // by sender: why it will send nothing more
  std::string failure_;
  OpInfo current_;
};

}  // namespace frugal::comm::detail
