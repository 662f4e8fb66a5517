// Built instead of mpi_communicator.cpp when Meson found no MPI (or -Dmpi=disabled): a run that asks
// for MPI fails here, naming the build option, instead of the build failing for everyone.
#include <cstdlib>
#include <string>

#include "comm/environment.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"

namespace frugal::comm {

bool started_by_mpirun() { return std::getenv(std::string(env::kMpiWorldSize).c_str()) != nullptr; }

std::unique_ptr<Communicator> make_mpi_communicator(const RunConfig&) {
  throw Error(
      "this frugal was built without Open MPI (meson option -Dmpi=disabled, or no MPI found): "
      "run under `frugal launch` (ZeroMQ) or rebuild with libopenmpi-dev installed");
}

}  // namespace frugal::comm
