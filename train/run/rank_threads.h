// --threads 0 ("all cores") on a host that runs several ranks: each rank's share of the cores.
// `frugal launch -n N` starts N ranks on one host and tells each (FRUGAL_LOCAL_SIZE); mpirun does
// the same (OMPI_COMM_WORLD_LOCAL_SIZE), and so does srun (its tasks per node, comm/slurm.h). Without it every rank would start a thread per core, and N
// ranks' OpenMP threads would wait on each other for time slices at every parallel region (measured:
// 4 DLRM ranks on 2 cores train 8x slower with 2 threads each than with 1).
#pragma once

namespace frugal::run {

// `requested` when it is not 0; else the host's cores divided by the ranks on this host (at least 1).
int threads_for_rank(int requested);

}  // namespace frugal::run
