#include "comm/local_communicator.h"

#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "comm/transport_communicator.h"

namespace frugal::comm {
namespace {


using detail::Message;
using detail::Payload;

class LocalTransport;

// The shared "network": who is still there to deliver to.
struct LocalFabric {
  std::mutex mutex;
  std::vector<std::weak_ptr<LocalTransport>> ranks;
  std::shared_ptr<LocalTransport> get(int r) {
    std::lock_guard lock(mutex);
    return ranks[r].lock();
  }
};

class LocalTransport final : public detail::Transport {
 public:
  LocalTransport(int rank, int size, std::shared_ptr<LocalFabric> fabric)
      : Transport(rank, size), fabric_(std::move(fabric)) {}
  ~LocalTransport() override {
    FrameHeader h;
    h.kind = FrameKind::goodbye;
    h.src = static_cast<uint32_t>(world_rank());
    for (int r = 0; r < world_size(); ++r) {
      if (r == world_rank()) continue;
      if (auto t = fabric_->get(r)) t->deliver({h, {}, true});
    }
  }
  std::string_view name() const override { return "local"; }
  uint64_t send(int dst, const FrameHeader& header, Payload payload) override {
    const uint64_t bytes = kFrameHeaderBytes + payload.size();
    if (auto t = fabric_->get(dst)) t->deliver({header, std::move(payload), true});
    return bytes;
  }

 private:
  std::shared_ptr<LocalFabric> fabric_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_communicators(int n, CollectiveTuning tuning) {
  FRUGAL_CHECK(n >= 1, fmt::format("make_local_communicators: {} ranks", n));
  auto fabric = std::make_shared<LocalFabric>();
  std::vector<std::shared_ptr<LocalTransport>> transports;
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    transports.push_back(std::make_shared<LocalTransport>(r, n, fabric));
    fabric->ranks.push_back(transports.back());
    members.push_back(r);
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(
        std::make_unique<detail::TransportCommunicator>(transports[r], members, 0, tuning));
  }
  return comms;
}

void run_local(int n, const std::function<void(Communicator&)>& fn, CollectiveTuning tuning) {
  auto comms = make_local_communicators(n, tuning);
  std::exception_ptr first;  // the root cause: later failures are usually its consequences
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      set_error_rank(r);
      try {
        fn(*comms[r]);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
        // Closing the failed rank's communicator tells the others it is gone.
        comms[r].reset();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace frugal::comm
