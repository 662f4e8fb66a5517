#include "comm/routed_communicator.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

RoutedCommunicator::RoutedCommunicator(const TransportMap& map, std::unique_ptr<Communicator> mpi,
                                       std::unique_ptr<Communicator> zmq)
    : map_(map), mpi_(std::move(mpi)), zmq_(std::move(zmq)) {
  FRUGAL_CHECK(mpi_ != nullptr && zmq_ != nullptr, "RoutedCommunicator: both transports' communicators are needed");
  FRUGAL_CHECK(mpi_->rank() == zmq_->rank() && mpi_->size() == zmq_->size(),
               fmt::format("RoutedCommunicator: the two transports place this process differently (rank {} of {} "
                           "over MPI, {} of {} over ZeroMQ)", mpi_->rank(), mpi_->size(), zmq_->rank(), zmq_->size()));
}

RoutedCommunicator::RoutedCommunicator(const TransportTable& table, std::unique_ptr<Communicator> mpi,
                                       std::unique_ptr<Communicator> zmq)
    : RoutedCommunicator(table.per_kind(), std::move(mpi), std::move(zmq)) {
  table_ = table;
}

Communicator& RoutedCommunicator::over(OpRoute route, std::optional<uint64_t> bytes) const {
  const Transport t = table_ && bytes ? table_->best(route, *bytes) : map_.of(route);
  return t == Transport::zmq ? *zmq_ : *mpi_;
}

std::string RoutedCommunicator::describe() const {
  return table_ ? fmt::format("auto (table {:08x}, by size; otherwise {})", table_->digest(), map_.to_string())
                : map_.to_string();
}

std::unique_ptr<Communicator> RoutedCommunicator::split(int color, int key) {
  auto mpi = mpi_->split(color, key);
  auto zmq = zmq_->split(color, key);
  if (mpi == nullptr || zmq == nullptr) return nullptr;
  if (table_) return std::make_unique<RoutedCommunicator>(*table_, std::move(mpi), std::move(zmq));
  return std::make_unique<RoutedCommunicator>(map_, std::move(mpi), std::move(zmq));
}

Work RoutedCommunicator::all_reduce(std::span<float> data, ReduceOp op) {
  return over(OpRoute::all_reduce, data.size_bytes()).all_reduce(data, op);
}

Work RoutedCommunicator::all_gatherv(std::span<const float> mine, std::span<float> all,
                                     std::span<const size_t> counts) {
  return over(OpRoute::all_gather, all.size_bytes()).all_gatherv(mine, all, counts);
}

Work RoutedCommunicator::reduce_scatterv(std::span<const float> all, std::span<float> mine,
                                         std::span<const size_t> counts, ReduceOp op) {
  return over(OpRoute::reduce_scatter, all.size_bytes()).reduce_scatterv(all, mine, counts, op);
}

Work RoutedCommunicator::broadcast(std::span<float> data, int root) {
  return over(OpRoute::broadcast, data.size_bytes()).broadcast(data, root);
}

Work RoutedCommunicator::broadcast_bytes(std::vector<std::byte>& data, int root) {
  return over(OpRoute::broadcast).broadcast_bytes(data, root);
}

Work RoutedCommunicator::all_gather_bytes(std::span<const std::byte> mine, std::vector<std::vector<std::byte>>& all) {
  return over(OpRoute::all_gather).all_gather_bytes(mine, all);
}

Work RoutedCommunicator::barrier() { return over(OpRoute::barrier).barrier(); }

Work RoutedCommunicator::send(int dst, int tag, std::span<const std::byte> bytes) {
  return over(OpRoute::p2p).send(dst, tag, bytes);
}

Work RoutedCommunicator::recv(int src, int tag, std::vector<std::byte>& out) {
  return over(OpRoute::p2p).recv(src, tag, out);
}

CommStats RoutedCommunicator::stats() const {
  CommStats s = mpi_->stats();
  s += zmq_->stats();
  return s;
}

void RoutedCommunicator::reset_stats() {
  mpi_->reset_stats();
  zmq_->reset_stats();
}

CommStats RoutedCommunicator::stats_of(Transport transport) const {
  return transport == Transport::zmq ? zmq_->stats() : mpi_->stats();
}

}  // namespace frugal::comm
