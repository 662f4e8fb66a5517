// Byte accounting: what one communicator put on and took off the wire, by operation kind and by
// peer, since it was made (or reset_stats()). A caller measures a span of work by subtracting the
// snapshots taken before and after it: the trainer does so for a whole epoch, with the total() of
// its model-parallel and of its data-parallel group (FitResult::mp_bytes_sent, dp_bytes_sent), and
// `frugal train` divides the epoch's bytes by the points the rank's group processed in it to log
// bytes on the wire per sample.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace frugal::comm {

enum class OpKind : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  barrier,
  point_to_point,
  split,
  control,  // heartbeats, aborts, goodbyes: the transport's own traffic (world communicator only)
};
inline constexpr int kOpKinds = 8;
std::string_view to_string(OpKind kind);

struct ByteCount {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  ByteCount& operator+=(const ByteCount& o);
  ByteCount& operator-=(const ByteCount& o);
};

// A snapshot. Bytes are header plus payload of every frame (what this library writes; TCP/IP
// overhead is not included). Snapshots subtract, so "bytes of this step" = after - before.
struct CommStats {
  std::array<ByteCount, kOpKinds> by_kind{};
  std::vector<ByteCount> by_peer;  // indexed by rank in this communicator

  ByteCount total() const;
  const ByteCount& kind(OpKind k) const { return by_kind[static_cast<size_t>(k)]; }
  CommStats& operator-=(const CommStats& o);
  CommStats& operator+=(const CommStats& o);  // two transports' counts of one group together
};
CommStats operator-(CommStats a, const CommStats& b);

// What a ring all-reduce of `bytes` sends from each of `ranks` ranks, 2 * (P-1) / P * bytes: the one
// traffic model of the project (MPI's all-reduce statistics, the payload accounting of the replica
// reducers and of DCT-DP's dense fallback).
constexpr uint64_t ring_all_reduce_bytes(uint64_t bytes, int ranks) {
  return ranks > 1 ? 2 * static_cast<uint64_t>(ranks - 1) * bytes / static_cast<uint64_t>(ranks) : 0;
}

// Lock-free counters behind CommStats, updated from the communication threads.
class StatsCounter {
 public:
  explicit StatsCounter(int peers);
  void add_sent(OpKind kind, int peer, uint64_t bytes);
  void add_received(OpKind kind, int peer, uint64_t bytes);
  CommStats snapshot() const;
  void reset();

 private:
  struct Cell {
    std::atomic<uint64_t> sent{0}, received{0}, messages_sent{0}, messages_received{0};
  };
  std::array<Cell, kOpKinds> by_kind_;
  std::unique_ptr<Cell[]> by_peer_;
  int peers_;
};

}  // namespace frugal::comm
