// TransportMap: which transport carries each kind of operation in a job that has two (an mpirun job
// whose ranks open the ZeroMQ mesh too: `--transport-map`, FRUGAL_TRANSPORT_MAP). Open MPI and
// frugal's ZeroMQ collectives are fast at different message sizes (bench/comm); the map lets each
// kind go where it is faster (MCR-DL's mix of backends per operation).
//
//   all_reduce=mpi,all_gather=zmq,p2p=zmq
//
// Kinds: all_reduce, all_gather (all_gatherv and all_gather_bytes), reduce_scatter, broadcast (with
// broadcast_bytes), p2p (send and recv), barrier. A kind the text does not name goes over MPI, the
// transport that started the job.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "comm/init.h"

namespace frugal::comm {

enum class OpRoute : uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, p2p, barrier };
inline constexpr size_t kOpRoutes = 6;
std::string_view to_string(OpRoute route);

struct TransportMap {
  std::array<Transport, kOpRoutes> route{Transport::mpi, Transport::mpi, Transport::mpi,
                                         Transport::mpi, Transport::mpi, Transport::mpi};
  Transport of(OpRoute r) const { return route[static_cast<size_t>(r)]; }
  // Whether any kind goes over `t`.
  bool uses(Transport t) const;
  // "all_reduce=mpi,all_gather=zmq,..." with every kind named (what ranks compare at start).
  std::string to_string() const;
};

// Parses "KIND=TRANSPORT,..." (transports mpi or zmq); `source` names where the text came from in
// errors ("--transport-map", FRUGAL_TRANSPORT_MAP).
TransportMap parse_transport_map(std::string_view text, std::string_view source);

}  // namespace frugal::comm
