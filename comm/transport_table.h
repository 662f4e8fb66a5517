// TransportTable: how long each kind of collective took over MPI and over ZeroMQ at several message
// sizes on one cluster, measured once by `mpirun -np N frugal bench comm --tune` and saved as JSON;
// `--transport-map auto` routes each call over the transport that was faster at the nearest measured
// size (by message bytes, where every rank knows them: all_reduce, all_gatherv, reduce_scatterv,
// broadcast), and the kinds whose sizes only one rank knows (broadcast_bytes, all_gather_bytes,
// p2p, barrier) over the transport faster for their kind at the sizes measured, counted by wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport_map.h"

namespace frugal::comm {

struct TransportTiming {
  uint64_t bytes = 0;  // the call's whole buffer (all_gather, reduce_scatter: every rank's parts together)
  double mpi_seconds = 0.0, zmq_seconds = 0.0;  // per call, the slowest rank's
};

struct TransportTable {
  int ranks = 0;  // the job it was measured with
  std::vector<TransportTiming> by_kind[kOpRoutes];  // ascending bytes; a kind may have none

  // The transport for a `bytes`-byte call of `route`: the faster at the nearest measured size (in
  // log scale); a kind without timings: MPI.
  Transport best(OpRoute route, uint64_t bytes) const;
  // One transport per kind, where the call's size is not known to every rank: the one faster at
  // more of the measured sizes (ties: MPI).
  TransportMap per_kind() const;
  std::string to_json() const;
  // CRC32C of to_json(): what ranks compare at start (they must route alike).
  uint32_t digest() const;
};

// Reads a table `frugal bench comm --tune` wrote; errors name `path` and what is wrong.
TransportTable load_transport_table(const std::string& path);
// Where --transport-map auto looks when FRUGAL_TRANSPORT_TABLE is unset: $HOME/.frugal/transport-table.json.
std::string default_transport_table_path();

}  // namespace frugal::comm
