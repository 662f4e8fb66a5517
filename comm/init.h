// frugal::comm::init: the one call a program makes to join its run. It picks the backend from how
// the process was started:
//   - under mpirun (OMPI_COMM_WORLD_SIZE is set):           Open MPI
//   - under `frugal launch` or with FRUGAL_SIZE / --size:   ZeroMQ (rank, size, coordinator, key
//                                                           from FRUGAL_* or the flags below)
//   - under `srun` with several tasks (SLURM_PROCID and     ZeroMQ, rank and size from Slurm, the
//     SLURM_NTASKS set, FRUGAL_RANK and FRUGAL_SIZE not):   coordinator FRUGAL_COORDINATOR or the
//                                                           node list's first host (comm/slurm.h)
//   - otherwise:                                            a 1-rank communicator
// Recognized flags are removed from argv (like MPI_Init), so the program's own parser never sees
// them: --coordinator HOST:PORT, --cluster-key FILE, --comm-timeout SECONDS, --rank N, --size N.
// Environment (comm/environment.h names and explains each): FRUGAL_RANK, FRUGAL_SIZE,
// FRUGAL_COORDINATOR, FRUGAL_CLUSTER_KEY, FRUGAL_COMM_TIMEOUT, FRUGAL_RENDEZVOUS_TIMEOUT,
// FRUGAL_BIND_HOST, FRUGAL_TRANSPORT (zmq|mpi|local forces a backend). Flags win over the
// environment. Errors name what was read: the variable, or the flag when init(argc, argv) took one.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/communicator.h"
#include "comm/run_config.h"

namespace frugal::comm {

// The backends, as FRUGAL_TRANSPORT (and `frugal launch --transport`) spell them: "zmq", "mpi",
// "local".
enum class Transport { zmq, mpi, local };
std::string_view to_string(Transport transport);

struct InitOptions {
  // Settings that must agree on every rank (model shape, seed, learning rate, ...); ranks that
  // differ refuse to start together and the error names the setting.
  RunConfig run_config;
  // A ZeroMQ run's cluster key file and peer timeout, as a program's own options give them (frugal
  // train --cluster-key / --comm-timeout). Precedence: init(argc, argv)'s flags, then these, then
  // FRUGAL_CLUSTER_KEY / FRUGAL_COMM_TIMEOUT. Errors name them as InitOptions::cluster_key and
  // InitOptions::comm_timeout_seconds.
  std::optional<std::string> cluster_key{};
  std::optional<double> comm_timeout_seconds{};
  // Any FRUGAL_* setting as a program's own flag gives it (frugal train --rank, --bind-host, ...):
  // the variable's name (comm/environment.h) -> the value and what errors about it name (the flag).
  // Precedence: init(argc, argv)'s flags, then these, then the typed fields above, then the
  // variables.
  struct Given {
    std::string value;
    std::string source;  // e.g. "--rank"
  };
  std::map<std::string, Given, std::less<>> settings{};
};

std::unique_ptr<Communicator> init(int& argc, char** argv, const InitOptions& options = {});
std::unique_ptr<Communicator> init(const InitOptions& options = {});  // environment only

// The peer timeout a run with `options` uses, in seconds: the program's setting (InitOptions::settings,
// then comm_timeout_seconds), else FRUGAL_COMM_TIMEOUT, else env::kDefaultCommTimeoutSeconds. What
// init gives its transport and what other links of the run (NCCL) wait at most; errors name the
// setting's source.
double comm_timeout_seconds(const InitOptions& options);

}  // namespace frugal::comm
