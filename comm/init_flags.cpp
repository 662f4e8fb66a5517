#include "comm/init_flags.h"

#include <utility>

#include <fmt/format.h>

#include "comm/environment.h"
#include "comm/slurm.h"
#include "comm/transport_map.h"
#include "comm/zmq_communicator.h"
#include "core/parse.h"

namespace frugal::comm {
namespace {

// The same expectations as comm::init has of the variables.
void integer_above_0(std::string_view flag, std::string_view v) {
  parse_number<int>(flag, v, "an integer above 0", [](int x) { return x > 0; });
}
void integer_from_0(std::string_view flag, std::string_view v) {
  parse_number<int>(flag, v, "an integer, at least 0", [](int x) { return x >= 0; });
}
void seconds(std::string_view flag, std::string_view v) {
  parse_number<double>(flag, v, "a positive number of seconds", [](double x) { return x > 0 && x < 1e9; });
}
void tcp_port(std::string_view flag, std::string_view v) {
  parse_number<int>(flag, v, "a TCP port, 1 to 65535", [](int x) { return x >= 1 && x <= 65535; });
}
void transport_map(std::string_view flag, std::string_view v) {
  if (v != "auto") parse_transport_map(v, flag);
}
void bytes(std::string_view flag, std::string_view v) {
  parse_number<int64_t>(flag, v, "a number of bytes, at least 1024", [](int64_t x) { return x >= 1024; });
}
void run_token(std::string_view flag, std::string_view v) {
  // Not throw_bad_value: an error must not echo the secret.
  if (v.empty() || v.size() > 255) throw Error(fmt::format("{}: a run token of {} bytes; expected 1 to 255", flag, v.size()));
}

std::vector<InitFlag> make_init_flags() {
  std::vector<InitFlag> out;
  auto add = [&](std::string_view flag, std::string_view variable, const std::string& help,
                 void (*check)(std::string_view, std::string_view) = nullptr) -> InitFlag& {
    InitFlag f;
    f.flag = flag;
    f.variable = variable;
    f.help = fmt::format("{}; else {}", help, variable);
    f.check = check;
    out.push_back(std::move(f));
    return out.back();
  };
  add("--transport", env::kTransport, "zmq, mpi or local: the backend, instead of the automatic choice (mpirun: "
                                      "mpi; --size or FRUGAL_SIZE set: zmq; else one rank)")
      .choices = {"zmq", "mpi", "local"};
  add("--size", env::kSize, "number of ranks of a ZeroMQ run", integer_above_0);
  add("--rank", env::kRank, "this process's rank, 0..size-1", integer_from_0);
  add("--coordinator", env::kCoordinator, "host:port that rank 0 binds and the other ranks dial");
  add("--coordinator-port", env::kCoordinatorPort,
      fmt::format("under srun without --coordinator: the port rank 0 listens on, on the step's first node "
                  "(default {})", slurm::kDefaultCoordinatorPort),
      tcp_port);
  add("--cluster-key", env::kClusterKey, "the cluster key file (frugal keygen) that authenticates and encrypts "
                                         "every link; on every rank or none")
      .existing_file = true;
  add("--run-token", env::kRunToken, "without a cluster key: a secret every rank of the run shares, so only processes "
                                     "that know it can connect (not encrypted; frugal launch makes one per launch; "
                                     "visible to `ps` here, the variable is not)",
      run_token);
  add("--comm-timeout", env::kCommTimeout,
      fmt::format("seconds of silence after which a peer is declared dead (default {:g})", env::kDefaultCommTimeoutSeconds),
      seconds);
  add("--rendezvous-timeout", env::kRendezvousTimeout, "seconds start-up waits for every rank to join (default 120)",
      seconds);
  add("--bind-host", env::kBindHost, "address this rank listens on for its peers (default: the local address "
                                     "facing the coordinator)");
  add("--max-message-bytes", env::kMaxMessageBytes,
      fmt::format("largest frame payload accepted or sent (default {}; the same on every rank)", kDefaultMaxMessageBytes),
      bytes);
  add("--max-queued-bytes", env::kMaxQueuedBytes,
      fmt::format("most bytes of frames from one peer held until an operation takes them (default {})",
                  kDefaultMaxQueuedBytes),
      bytes);
  add("--transport-map", env::kTransportMap,
      "an mpirun job: the transport of each kind of operation, e.g. all_reduce=mpi,all_gather=zmq,p2p=zmq "
      "(kinds all_reduce, all_gather, reduce_scatter, broadcast, p2p, barrier; transports mpi, zmq; a kind not "
      "named goes over mpi), or auto: each call over the transport --transport-table measured faster at its size; "
      "naming zmq opens the ZeroMQ mesh beside MPI (the same on every rank)",
      transport_map);
  add("--transport-table", env::kTransportTable,
      "--transport-map auto: the table `mpirun -np N frugal bench comm --tune --out FILE` measured (default "
      "$HOME/.frugal/transport-table.json)");
  return out;
}

}  // namespace

const std::vector<InitFlag>& init_flags() {
  static const std::vector<InitFlag> flags = make_init_flags();
  return flags;
}

}  // namespace frugal::comm
