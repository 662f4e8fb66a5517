// ZmqCommunicator: ranks in separate processes (or machines) joined by ZeroMQ over TCP.
//
// Start-up: rank 0 binds the coordinator address; every other rank binds its own port, connects to
// the coordinator and says hello (rank, size, address, run configuration); rank 0 checks that all
// agree and answers with the table of addresses, after which every rank talks to every other
// directly. Afterwards each rank's I/O thread sends heartbeats on quiet links; a peer silent for
// longer than `timeout` makes every pending and later operation fail with
// "rank N unreachable since <time>".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "comm/cluster_key.h"
#include "comm/environment.h"
#include "core/communicator.h"
#include "comm/run_config.h"

namespace frugal::comm {

// ZmqOptions::max_message_bytes unless FRUGAL_MAX_MESSAGE_BYTES says otherwise: 1 GiB.
inline constexpr int64_t kDefaultMaxMessageBytes = int64_t{1} << 30;
// ZmqOptions::max_queued_bytes unless FRUGAL_MAX_QUEUED_BYTES says otherwise: 1 GiB per peer.
inline constexpr int64_t kDefaultMaxQueuedBytes = int64_t{1} << 30;

struct ZmqOptions {
  int rank = 0;
  int size = 1;
  std::string coordinator = "127.0.0.1:0";  // host:port that rank 0 binds and the others dial
  std::optional<ClusterKey> cluster_key;    // CURVE authentication + encryption when set
  // Without a cluster key: a secret shared by the ranks of one run (`frugal launch` makes one per
  // launch). Every link then authenticates with it (ZeroMQ's PLAIN mechanism, checked by the ZAP
  // handler), so a process without it completes no handshake and nothing it sends reaches a rank;
  // it is not encrypted, so it keeps out strangers that can connect, not ones that can read the
  // traffic (a cluster key keeps out both). 1 to 255 bytes; empty: none.
  std::string run_token;
  // Silence after which a peer is declared dead.
  std::chrono::milliseconds timeout{static_cast<int64_t>(env::kDefaultCommTimeoutSeconds * 1000)};
  std::chrono::milliseconds rendezvous_timeout{120000};
  std::string bind_host;  // address this rank binds for its peers; empty: the one facing rank 0
  RunConfig run_config;   // must be equal on every rank
  CollectiveTuning tuning;
  // The largest frame payload accepted from a socket (ZMQ_MAXMSGSIZE: a peer sending a larger one is
  // disconnected) and sent (larger sends throw).
  int64_t max_message_bytes = kDefaultMaxMessageBytes;
  // The most bytes one peer's received frames may hold on this rank before an operation takes them
  // (a peer far ahead, or frames no operation will take); beyond it the run fails naming the peer.
  // At least one largest message (max_message_bytes) is always admitted.
  int64_t max_queued_bytes = kDefaultMaxQueuedBytes;
};

// Blocks until every rank has joined (or throws CommError saying who is missing or what differs).
std::unique_ptr<Communicator> make_zmq_communicator(const ZmqOptions& options);

}  // namespace frugal::comm
