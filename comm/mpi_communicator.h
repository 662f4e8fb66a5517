// MpiCommunicator: Open MPI underneath, for runs started with mpirun. One progress thread makes
// every MPI call (MPI_THREAD_FUNNELED), so callers on any thread just queue work. Errors come back
// as exceptions (MPI_ERRORS_RETURN), never as an abort of the job. Each collective is preceded by a
// tiny all-reduce of its signature, so ranks that issue different collectives get an error instead
// of a deadlock or silently mixed data.
#pragma once

#include <memory>

#include "core/communicator.h"
#include "comm/run_config.h"

namespace frugal::comm {

// The world communicator of this process (MPI is initialized on first call; once per process).
// run_config is compared across ranks like the ZeroMQ rendezvous does.
std::unique_ptr<Communicator> make_mpi_communicator(const RunConfig& run_config = {});

// True when this process was started by Open MPI's mpirun.
bool started_by_mpirun();

}  // namespace frugal::comm
