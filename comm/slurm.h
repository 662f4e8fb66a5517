// A rank started by Slurm's `srun` learns its place from Slurm's own variables, so that
// `srun -n 4 frugal train ...` needs no launcher: SLURM_PROCID and SLURM_NTASKS give the rank and
// the size, the first host of the step's node list (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST)
// is where rank 0 runs and so the coordinator's host, and the step's tasks per node give the ranks
// that share this host. comm::init reads them only when FRUGAL_RANK and FRUGAL_SIZE are unset
// (`frugal launch` inside an allocation still places its own ranks).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::comm::slurm {

// The port rank 0 listens on when the coordinator's host comes from Slurm's node list and neither
// FRUGAL_COORDINATOR nor FRUGAL_COORDINATOR_PORT says otherwise (torchrun's default too).
inline constexpr int kDefaultCoordinatorPort = 29500;

// Slurm's hostlist syntax: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5. Commas
// outside brackets separate hosts; a bracket holds numbers and ranges, whose zero padding is kept
// ("[08-10]" -> 08 09 10); several brackets in one name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1
// r2n2). Throws frugal::Error naming `source` (the variable) and the text when it is malformed.
std::vector<std::string> expand_hostlist(std::string_view source, std::string_view list);

// Slurm's tasks-per-node syntax: "2(x3),1" -> 2 2 2 1, one count per node of the node list.
// Throws frugal::Error naming `source` and the text when it is malformed.
std::vector<int> expand_tasks_per_node(std::string_view source, std::string_view text);

// What Slurm's variables say about this process.
struct Placement {
  int rank = 0, size = 1;
  // The first host of the step's node list (where rank 0 runs), or empty when no list is set.
  std::string first_host;
  std::string first_host_source;  // the variable it came from, for errors
  // The ranks on this host (SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE at SLURM_NODEID,
  // else SLURM_NTASKS_PER_NODE), when Slurm says.
  std::optional<int> local_size;
};

// The placement when SLURM_PROCID and SLURM_NTASKS are both set (a task of srun, or an sbatch
// script, which Slurm runs as task 0), else nullopt. Throws frugal::Error naming the variable
// when one is malformed.
std::optional<Placement> from_environment();

}  // namespace frugal::comm::slurm
