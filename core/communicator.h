// Communicator: a group of ranks that exchange data. One interface, three backends — Open MPI
// (mpi_communicator.h), ZeroMQ over TCP (zmq_communicator.h) and threads in one process
// (local_communicator.h); frugal::comm::init (init.h) picks one from the environment.
//
// Rules every backend keeps:
//  - Every call is asynchronous and returns a Work; wait() rethrows the error of this rank, of the
//    transport or of a remote rank. Buffers must stay alive until the Work is done.
//  - Collectives are issued by every rank of the communicator in the same order, from one thread.
//    A rank that issues a different collective (or the same one with other sizes) is detected: the
//    communicator is aborted on every rank with a message naming both calls, instead of hanging.
//  - After any failure the communicator is dead: every pending and later call fails with the same
//    error. Peers that die or fall silent past the timeout produce "rank N unreachable since ...".
//  - Reductions give bitwise identical results on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/comm_stats.h"
#include "core/work.h"

namespace frugal::comm {

enum class ReduceOp : uint8_t { sum, max, min };

// How the ZeroMQ and in-process backends pick and pipeline algorithms. Must be equal on all ranks.
struct CollectiveTuning {
  size_t ring_threshold_bytes = 64 << 10;  // at or above: ring algorithms; below: direct exchange
  size_t segment_bytes = 1 << 20;          // pipelining unit of the ring algorithms
};
std::string_view to_string(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;  // "local", "zmq" or "mpi"

  // Collective and blocking: ranks with the same color form a new communicator, ordered by
  // (key, rank). A negative color means "not in any group" and returns nullptr. The result is
  // independent of this one (own sequence numbers, own stats) but shares the transport.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // data := op over every rank's data (same length everywhere).
  virtual Work all_reduce(std::span<float> data, ReduceOp op = ReduceOp::sum) = 0;

  // all := concatenation of every rank's `mine` in rank order; counts[r] = length of rank r's part
  // (the same counts on every rank; all.size() == sum(counts)). Counts may differ between ranks.
  virtual Work all_gatherv(std::span<const float> mine, std::span<float> all,
                           std::span<const size_t> counts) = 0;
  // Equal parts: all.size() == size() * mine.size().
  Work all_gather(std::span<const float> mine, std::span<float> all);

  // mine := op over every rank's all[offset(rank) .. + counts[rank]); all.size() == sum(counts).
  virtual Work reduce_scatterv(std::span<const float> all, std::span<float> mine,
                               std::span<const size_t> counts, ReduceOp op = ReduceOp::sum) = 0;
  // Equal parts: all.size() == size() * mine.size().
  Work reduce_scatter(std::span<const float> all, std::span<float> mine,
                      ReduceOp op = ReduceOp::sum);

  // data := root's data (same length everywhere).
  virtual Work broadcast(std::span<float> data, int root) = 0;
  // data := root's bytes; only the root needs to know the length.
  virtual Work broadcast_bytes(std::vector<std::byte>& data, int root) = 0;
  // all[r] := rank r's bytes; lengths may differ (sparse payloads from comm/codec.h).
  virtual Work all_gather_bytes(std::span<const std::byte> mine,
                                std::vector<std::vector<std::byte>>& all) = 0;
  virtual Work barrier() = 0;

  // Point to point, matched by (source, tag), in order per (source, tag). send copies `bytes`
  // before returning. Not ordered with respect to collectives.
  virtual Work send(int dst, int tag, std::span<const std::byte> bytes) = 0;
  virtual Work recv(int src, int tag, std::vector<std::byte>& out) = 0;

  // Bytes this communicator sent and received, per operation kind and per peer rank.
  virtual CommStats stats() const = 0;
  virtual void reset_stats() = 0;
};

// Every rank's `value` in rank order (an all-gather of one scalar, e.g. a loss or a norm to sum in
// rank order, so that every rank gets the same bits). A rank that sends another size fails, naming
// `what` (e.g. "gradient norm").
template <class T>
std::vector<T> all_gather_value(Communicator& group, T value, std::string_view what) {
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(std::as_bytes(std::span<const T>(&value, 1)), all).wait();
  std::vector<T> out(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(T))
      throw Error("rank " + std::to_string(r) + " sent a " + std::string(what) + " of " + std::to_string(all[r].size()) +
                  " bytes, expected " + std::to_string(sizeof(T)));
    std::memcpy(&out[r], all[r].data(), sizeof(T));
  }
  return out;
}

// Offsets of each rank's part for per-rank counts (exclusive prefix sum).
std::vector<size_t> displacements(std::span<const size_t> counts);

// A group that takes part in exchanges: present and of more than one rank (a missing or one-rank
// group means the work is not split, and nothing crosses the wire).
inline bool is_active(const Communicator* group) { return group != nullptr && group->size() > 1; }

}  // namespace frugal::comm
