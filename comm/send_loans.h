// Internal: the frames of a collective that carry the caller's own memory, sent without a copy.
// A collective sends the rank's own data (its block of a ring, its part of a direct exchange) as a
// payload that points into the caller's buffer; the transport holds that payload until the frame
// has gone to the wire (ZeroMQ's I/O thread releases it once written) or its peer is gone. The
// collective's Work may only complete once every such payload is back: after that the caller may
// change or free the buffer. Payloads of other kinds (received frames, fresh partial sums) are
// not counted.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>

#include "comm/message.h"

namespace frugal::comm::detail {

class SendLoans {
 public:
  SendLoans() : count_(std::make_shared<std::atomic<int>>(0)) {}
  SendLoans(const SendLoans&) = delete;
  SendLoans& operator=(const SendLoans&) = delete;

  // A payload over `bytes` itself (no copy). `bytes` must stay unchanged until wait_returned().
  Payload lend(std::span<const std::byte> bytes);

  // Blocks until every payload lent so far, and every copy of one, has been released.
  void wait_returned();

  // Payloads lent and not yet released.
  int outstanding() const { return count_->load(); }

 private:
  // Shared with the payloads' owners, so a release after this object is gone is harmless.
  std::shared_ptr<std::atomic<int>> count_;
};

}  // namespace frugal::comm::detail
