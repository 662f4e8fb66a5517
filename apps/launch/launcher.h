// Starts the ranks of a run on this machine, or over ssh on the hosts of a hostfile, and supervises
// them: every output line is prefixed with its rank, and when one rank fails the others are stopped
// (SIGTERM, then SIGKILL after a grace period) so that a run never half-hangs; under --max-restarts
// the whole job is then started again (apps/launch/restart_policy.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/init.h"

namespace frugal::cli {

struct LaunchSpec {
  int ranks = 1;
  comm::Transport transport = comm::Transport::zmq;  // zmq: one process per rank; mpi: through mpirun
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // extra environment for every rank
  std::string coordinator;                 // empty: 127.0.0.1 and a free port
  int grace_seconds = 5;
  // Non-empty (e.g. "100mbit"): every rank in its own network namespace behind a bridge, each
  // link capped at this rate in both directions (apps/launch/netns_cluster.h). Needs root; zmq only.
  std::string bandwidth;
  // Non-empty: the ranks run on the hosts this file lists (apps/launch/hostfile.h), each started by `ssh`
  // with its FRUGAL_* variables (those of the launcher's environment too, and `env`), FRUGAL_LOCAL_SIZE
  // the ranks on its host, the coordinator the first host at port 29500 unless `coordinator` is set.
  // zmq only; not with `bandwidth` or `max_restarts`.
  std::string hostfile;
  // The command that runs a command on a host: `SSH HOST COMMAND` (words split at blanks, quotes
  // group them). When it is ssh itself, `-o BatchMode=yes` is added: a password prompt would hang.
  std::string ssh = "ssh";
  // When a rank fails: stop the others and start the whole job again, at most this many times,
  // resuming from the command's --checkpoint DIR once it holds one (apps/launch/restart_policy.h).
  int max_restarts = 0;
  // > 0: each restart runs on one rank fewer than the start that failed (the failed rank's place is
  // left out, as torchrun leaves out a lost node), never fewer than this; the command's --resume
  // reslices the checkpoint onto the ranks left. 0: every restart uses all `ranks`.
  int min_ranks = 0;
  // ZeroMQ ranks without a cluster key get a run token made for this launch (FRUGAL_RUN_TOKEN, the
  // same across restarts), so only they can connect to each other; one already set in the
  // launcher's environment or `env` is used instead. false: none (--no-run-token).
  bool run_token = true;
};

// Returns the exit status for the launcher: 0 when every rank exited 0 (in the last start, under
// --max-restarts), else the status of the first rank that failed (128 + signal number for a rank
// killed by a signal).
int launch(const LaunchSpec& spec);

}  // namespace frugal::cli
