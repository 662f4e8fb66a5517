// RoutedCommunicator: one group of ranks reachable over two transports at once, each kind of
// operation sent over the transport a TransportMap names (comm/transport_map.h). Made by comm::init
// for an mpirun job with --transport-map: the MPI communicator mpirun started and the ZeroMQ mesh
// its ranks open as well, the same ranks in the same order. split() splits both alike.
//
// The rules of core/communicator.h hold: every rank routes a kind the same way (the ranks compare
// the map at start), so each transport sees every rank issue its collectives in the same order.
// With two ranks a sum is one addition, so results are bitwise the same whatever the map; with
// more, Open MPI's all-reduce may add in another order than frugal's ring (as between an mpirun
// run and a `frugal launch` run). Bytes are counted per transport (stats_of).
#pragma once

#include <memory>
#include <optional>

#include "comm/transport_map.h"
#include "comm/transport_table.h"
#include "core/communicator.h"

namespace frugal::comm {

class RoutedCommunicator final : public Communicator {
 public:
  // `mpi` and `zmq`: the same group over each transport (rank and size equal).
  RoutedCommunicator(const TransportMap& map, std::unique_ptr<Communicator> mpi, std::unique_ptr<Communicator> zmq);
  // --transport-map auto: calls whose size every rank knows go where `table` measured the faster
  // transport at that size; the others by kind (TransportTable::per_kind).
  RoutedCommunicator(const TransportTable& table, std::unique_ptr<Communicator> mpi, std::unique_ptr<Communicator> zmq);

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string_view backend() const override { return "mpi+zmq"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  Work all_reduce(std::span<float> data, ReduceOp op) override;
  Work all_gatherv(std::span<const float> mine, std::span<float> all, std::span<const size_t> counts) override;
  Work reduce_scatterv(std::span<const float> all, std::span<float> mine, std::span<const size_t> counts,
                       ReduceOp op) override;
  Work broadcast(std::span<float> data, int root) override;
  Work broadcast_bytes(std::vector<std::byte>& data, int root) override;
  Work all_gather_bytes(std::span<const std::byte> mine, std::vector<std::vector<std::byte>>& all) override;
  Work barrier() override;
  Work send(int dst, int tag, std::span<const std::byte> bytes) override;
  Work recv(int src, int tag, std::vector<std::byte>& out) override;
  // Both transports' bytes together.
  CommStats stats() const override;
  void reset_stats() override;

  // One transport's bytes (Transport::mpi or Transport::zmq).
  CommStats stats_of(Transport transport) const;
  const TransportMap& map() const { return map_; }
  // What routes the calls, for logs: the map's text, or "auto (table ...): " and the per-kind map.
  std::string describe() const;
  // One transport's communicator (`frugal bench comm --tune` times each).
  Communicator& transport(Transport t) { return t == Transport::zmq ? *zmq_ : *mpi_; }

 private:
  // The communicator for a call of `route`; `bytes`: the call's size where every rank knows it.
  Communicator& over(OpRoute route, std::optional<uint64_t> bytes = std::nullopt) const;

  TransportMap map_;
  std::optional<TransportTable> table_;
  std::unique_ptr<Communicator> mpi_, zmq_;
};

}  // namespace frugal::comm
