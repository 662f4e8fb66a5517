// Internal: the ZeroMQ transport. One ROUTER socket per rank receives from all peers; one DEALER
// per peer sends. ZeroMQ sockets are not thread-safe, so each is guarded by a mutex and the thread
// that needs one uses it itself, with no hand-off through a queue: the thread that runs a
// collective puts its frames on the peer's dealer, and while it waits for a frame it drains the
// ROUTER into the mailboxes for a short while (poll_incoming) before it sleeps. The I/O thread
// drains the ROUTER whenever ZeroMQ signals that something arrived, sends heartbeats on the same
// dealers, answers authentication (ZAP) requests and watches for silent peers.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/peer_quota.h"
#include "comm/transport.h"
#include "comm/zmq_communicator.h"

namespace frugal::comm::detail {

// Reports the messages a rank drops because they are not from a rank of the run (a stranger on its
// port, garbage, a malformed message during start-up): the first in full, then at most one line
// every kEvery with how many were dropped since. Anything that reaches the port can send thousands
// a second, and a line for each would flood the log and slow the I/O thread that writes it.
class DropLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kEvery{10};

  explicit DropLog(int rank) : rank_(rank) {}
  // One more dropped message; `reason` says what it was and why it was dropped.
  void drop(std::string_view reason, Clock::time_point now = Clock::now());
  // Reports the drops not reported yet once kEvery has passed since the last line (called from the
  // I/O thread's idle loop, so that the last burst of a flood is reported too).
  void tick(Clock::time_point now = Clock::now());
  uint64_t dropped() const { return total_; }

 private:
  void report(Clock::time_point now);

  int rank_;
  uint64_t total_ = 0;
  uint64_t pending_ = 0;  // dropped and not reported yet
  std::string latest_;    // the reason of the latest of those
  Clock::time_point last_line_{};
  bool reported_any_ = false;
};

// The rank whose DEALER uses this ZeroMQ routing id: exactly "r<rank>" as make_dealer sets it,
// in decimal without leading zeros, of a rank below `size`; -1 for any other id. Only the exact
// spelling counts: "r01" is another routing id to the ROUTER, so its connection is not rank 1's.
int rank_of_routing_id(std::string_view id, int size);

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(const ZmqOptions& options);
  ~ZmqTransport() override;

  std::string_view name() const override { return "zmq"; }
  uint64_t send(int dst, const FrameHeader& header, Payload payload) override;
  bool releases_sent_payloads() const override { return true; }
  std::chrono::microseconds receive_spin() const override { return receive_spin_; }
  void claim_receive() override;
  void release_receive() override;
  void poll_incoming() override;

 private:
  using Clock = std::chrono::steady_clock;
  // How long rank 0, having refused to start, keeps telling ranks whose hello comes late why.
  static constexpr std::chrono::milliseconds kRejectGrace{1000};
  // How long a collective waiting for a frame drains the ROUTER itself before it sleeps.
  static constexpr std::chrono::microseconds kReceiveSpin{200};
  // Messages ZeroMQ keeps per incoming connection before it stops reading it (ZMQ_RCVHWM).
  static constexpr int kReceiveHwm = 1000;
  // PLAIN's user name and its length limit for the password (one length byte in the HELLO command).
  static constexpr std::string_view kRunTokenUser = "frugal";
  static constexpr size_t kMaxRunTokenBytes = 255;

  // zmq_rendezvous.cpp
  void rendezvous();
  void rendezvous_as_coordinator();
  void rendezvous_as_member();
  void reject_latecomers(const std::string& problem, std::vector<std::string> told);
  bool take_answer(void* coord);
  void* make_dealer(int peer, const std::string& endpoint);

  // zmq_transport.cpp
  void* make_socket(int type, bool server);
  // A cluster key or a run token: every link is authenticated and the ZAP handler runs.
  bool authenticated() const { return opt_.cluster_key.has_value() || !opt_.run_token.empty(); }
  void service_zap();
  void progress();
  void receive_all();
  void heartbeat_and_watch(Clock::time_point now);
  // Puts one frame on dealers_[dst]; the caller holds links_[dst].mutex.
  void send_now(int dst, const std::array<std::byte, kFrameHeaderBytes>& header,
                const Payload& payload);
  void send_control(int dst, FrameKind kind);
  // Peer `p` said goodbye or is dead: nothing more is sent to it, and its dealer is closed at once
  // (no linger), so that the frames still queued for it are dropped and their payloads released.
  void drop_link(int p);

  ZmqOptions opt_;
  void* ctx_ = nullptr;
  void* router_ = nullptr;
  void* zap_ = nullptr;
  std::vector<void*> dealers_;  // by world rank; nullptr for this rank
  std::string endpoint_;        // where router_ listens
  int wake_fd_ = -1;  // wakes the I/O thread to stop
  int router_fd_ = -1;  // ZMQ_FD of router_: readable when ZeroMQ has something for it
  // Guards router_ and what receive_all updates (last_heard_, drops_): the I/O thread and
  // collective threads waiting for a frame (poll_incoming) both drain it.
  std::mutex router_mutex_;
  std::atomic<int> receivers_{0};     // threads holding a claim_receive
  std::atomic<bool> io_parked_{false};  // the I/O thread polls without router_fd_ (receivers_ > 0)
  std::chrono::milliseconds heartbeat_every_;
  std::chrono::microseconds receive_spin_{kReceiveSpin};

  // What the threads that send to one peer share: collective threads (data, aborts) and the I/O
  // thread (heartbeats), then the destructor (goodbye).
  struct Link {
    std::mutex mutex;                          // guards the peer's dealer
    std::atomic<Clock::rep> last_sent{0};      // Clock ticks of the latest frame sent
    std::atomic<bool> left{false};             // said goodbye or declared dead: send nothing more
  };
  std::unique_ptr<Link[]> links_;  // by world rank
  std::atomic<bool> stop_{false};
  std::thread thread_;

  std::vector<Clock::time_point> last_heard_;  // under router_mutex_
  std::vector<std::chrono::system_clock::time_point> last_heard_wall_;
  std::atomic<bool> failed_{false};
  std::shared_ptr<PeerQuota> quota_;  // bytes each peer's frames hold here until taken
  DropLog drops_;                     // messages from strangers (I/O thread, or rendezvous before it)
};

}  // namespace frugal::comm::detail
