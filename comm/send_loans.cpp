#include "comm/send_loans.h"

#include <thread>

namespace frugal::comm::detail {

Payload SendLoans::lend(std::span<const std::byte> bytes) {
  count_->fetch_add(1);
  // The owner owns nothing: its "deletion", when the last copy of the payload goes, is the return.
  std::shared_ptr<const void> owner(count_.get(), [count = count_](const void*) {
    if (count->fetch_sub(1) == 1) count->notify_all();
  });
  return Payload(std::move(owner), bytes.data(), bytes.size());
}

void SendLoans::wait_returned() {
  // Usually all are back by the time a collective has received its last frame: the peer's frames
  // followed ours. A few yields cover the I/O thread that is just releasing the last one.
  for (int i = 0; i < 64; ++i) {
    if (count_->load() == 0) return;
    std::this_thread::yield();
  }
  for (int n = count_->load(); n != 0; n = count_->load()) count_->wait(n);
}

}  // namespace frugal::comm::detail
