// Internal: the Communicator for transports that only move frames (ZeroMQ, in-process). Collectives
// are built here from point-to-point frames: ring algorithms (reduce-scatter + all-gather,
// segmented so that receiving, reducing and forwarding overlap) for large messages and direct
// exchanges for small ones. Each communicator runs its collectives on its own thread, in issue
// order, and its point-to-point receives on a second one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "comm/send_loans.h"
#include "comm/transport.h"

namespace frugal::comm::detail {

using Tuning = CollectiveTuning;

class TransportCommunicator final : public Communicator {
 public:
  // members: world ranks of this communicator in rank order; this rank must be one of them.
  TransportCommunicator(std::shared_ptr<Transport> transport, std::vector<int> members,
                        uint64_t comm_id, Tuning tuning = {});
  ~TransportCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string_view backend() const override { return transport_->name(); }
  std::unique_ptr<Communicator> split(int color, int key) override;

  Work all_reduce(std::span<float> data, ReduceOp op) override;
  Work all_gatherv(std::span<const float> mine, std::span<float> all,
                   std::span<const size_t> counts) override;
  Work reduce_scatterv(std::span<const float> all, std::span<float> mine,
                       std::span<const size_t> counts, ReduceOp op) override;
  Work broadcast(std::span<float> data, int root) override;
  Work broadcast_bytes(std::vector<std::byte>& data, int root) override;
  Work all_gather_bytes(std::span<const std::byte> mine,
                        std::vector<std::vector<std::byte>>& all) override;
  Work barrier() override;
  Work send(int dst, int tag, std::span<const std::byte> bytes) override;
  Work recv(int src, int tag, std::vector<std::byte>& out) override;

  CommStats stats() const override;
  void reset_stats() override;

 private:
  struct Op {
    OpInfo info;
    OpKind kind = OpKind::control;
    std::function<void(const Op&)> body;
    std::shared_ptr<WorkState> state;
  };
  struct Queue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Op> ops;
    bool stop = false;
    std::thread thread;
  };

  // How long an operation thread keeps its receive claim after its queue ran empty.
  static constexpr std::chrono::microseconds kClaimLinger{500};
  // Held by an operation thread while it sleeps on its mailbox: the thread's receive claim is let go
  // meanwhile, so that frames are delivered by the transport's own thread. A transport without a
  // receive spin takes no claims (run()), so there is none to let go.
  struct SleepingReceiver {
    explicit SleepingReceiver(Transport& t) : transport(t), claimed(t.receive_spin().count() > 0) {
      if (claimed) transport.release_receive();
    }
    ~SleepingReceiver() {
      if (claimed) transport.claim_receive();
    }
    SleepingReceiver(const SleepingReceiver&) = delete;
    SleepingReceiver& operator=(const SleepingReceiver&) = delete;
    Transport& transport;
    const bool claimed;
  };
  // Polls the network on this thread (Transport::poll_incoming) until ready() or receive_spin
  // has passed; whether ready().
  bool spin_until(const std::function<bool()>& ready);

  Work submit(OpKind kind, std::string description, std::vector<uint64_t> signature,
              std::function<void(const Op&)> body);
  void run(Queue& q, bool collective);
  void abort(const std::string& reason);

  // Frame helpers of the algorithms (peer = rank in this communicator).
  // A payload of the caller's own floats, which stay unchanged until the operation ends: lent
  // (no copy) where the transport releases what it sent, copied otherwise.
  Payload own_floats(std::span<const float> v);
  void send_to(const Op& op, int peer, uint32_t step, uint32_t part, Payload payload);
  Message recv_from(const Op& op, int peer, uint32_t step, uint32_t part);
  void send_floats(const Op& op, int peer, uint32_t step, std::span<const float> block);
  void recv_floats(const Op& op, int peer, uint32_t step, std::span<float> block);
  void recv_reduce(const Op& op, int peer, uint32_t step, uint32_t part, std::span<float> seg,
                   ReduceOp rop);
  size_t segments(size_t floats) const;
  std::span<float> segment(std::span<float> block, size_t j) const;
  bool use_ring(size_t bytes) const;

  void ring_all_reduce(const Op& op, std::span<float> data, ReduceOp rop);
  void direct_all_reduce(const Op& op, std::span<float> data, ReduceOp rop);
  void ring_all_gather(const Op& op, std::span<float> all, const std::vector<size_t>& displs);
  void direct_all_gather(const Op& op, std::span<float> all, const std::vector<size_t>& displs);
  void ring_reduce_scatter(const Op& op, std::span<const float> all, std::span<float> mine,
                           const std::vector<size_t>& displs, ReduceOp rop);
  void direct_reduce_scatter(const Op& op, std::span<const float> all, std::span<float> mine,
                             const std::vector<size_t>& displs, ReduceOp rop);
  void exchange_bytes(const Op& op, std::span<const std::byte> mine,
                      std::vector<std::vector<std::byte>>& all);

  std::shared_ptr<Transport> transport_;
  std::vector<int> members_;
  int rank_ = 0;
  uint64_t comm_id_;
  Tuning tuning_;
  std::shared_ptr<Mailbox> mailbox_;
  StatsCounter stats_;
  uint64_t next_seq_ = 1;  // advanced by the issuing thread
  Queue collectives_, receives_;
  SendLoans loans_;  // the collective thread's (own_floats); all back before a collective ends
};

}  // namespace frugal::comm::detail
