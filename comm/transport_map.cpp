#include "comm/transport_map.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

// Here rather than in init.cpp: the transport map and table name transports without starting one
// (and the fuzz target of the table links without MPI or ZeroMQ).
std::string_view to_string(Transport transport) {
  switch (transport) {
    case Transport::zmq: return "zmq";
    case Transport::mpi: return "mpi";
    case Transport::local: return "local";
  }
  return "?";
}

std::string_view to_string(OpRoute route) {
  switch (route) {
    case OpRoute::all_reduce: return "all_reduce";
    case OpRoute::all_gather: return "all_gather";
    case OpRoute::reduce_scatter: return "reduce_scatter";
    case OpRoute::broadcast: return "broadcast";
    case OpRoute::p2p: return "p2p";
    case OpRoute::barrier: return "barrier";
  }
  return "?";
}

bool TransportMap::uses(Transport t) const {
  for (const Transport r : route)
    if (r == t) return true;
  return false;
}

std::string TransportMap::to_string() const {
  std::string out;
  for (size_t i = 0; i < kOpRoutes; ++i)
    out += fmt::format("{}{}={}", i == 0 ? "" : ",", comm::to_string(static_cast<OpRoute>(i)), comm::to_string(route[i]));
  return out;
}

TransportMap parse_transport_map(std::string_view text, std::string_view source) {
  TransportMap map;
  std::array<bool, kOpRoutes> named{};
  FRUGAL_CHECK(!text.empty(), fmt::format("{}: empty; expected KIND=TRANSPORT,... such as all_reduce=mpi,all_gather=zmq",
                                          source));
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    FRUGAL_CHECK(eq != std::string_view::npos,
                 fmt::format("{}: '{}' is not KIND=TRANSPORT (such as all_reduce=mpi)", source, item));
    const std::string_view kind = item.substr(0, eq), transport = item.substr(eq + 1);
    size_t k = kOpRoutes;
    for (size_t i = 0; i < kOpRoutes; ++i)
      if (kind == comm::to_string(static_cast<OpRoute>(i))) k = i;
    FRUGAL_CHECK(k < kOpRoutes, fmt::format("{}: unknown kind '{}': expected all_reduce, all_gather, reduce_scatter, "
                                            "broadcast, p2p or barrier", source, kind));
    FRUGAL_CHECK(!named[k], fmt::format("{}: '{}' is named twice", source, kind));
    named[k] = true;
    FRUGAL_CHECK(transport == "mpi" || transport == "zmq",
                 fmt::format("{}: {}={}: the transport is mpi or zmq", source, kind, transport));
    map.route[k] = transport == "mpi" ? Transport::mpi : Transport::zmq;
    start = end + 1;
  }
  return map;
}

}  // namespace frugal::comm
