// Built instead of the zmq_*.cpp files and cluster_key.cpp when Meson found no ZeroMQ (or
// -Dzmq=disabled): multi-rank runs other than under mpirun fail here, naming the build option.
#include "comm/cluster_key.h"
#include "comm/zmq_communicator.h"
#include "core/check.h"

namespace frugal::comm {
namespace {

[[noreturn]] void unavailable(const char* what) {
  throw Error(std::string(what) +
              " needs ZeroMQ, and this frugal was built without it (meson option -Dzmq=disabled, or "
              "no libzmq found): run under mpirun, or rebuild with libzmq3-dev installed");
}

}  // namespace

std::unique_ptr<Communicator> make_zmq_communicator(const ZmqOptions&) {
  unavailable("a ZeroMQ run (frugal launch, FRUGAL_COORDINATOR)");
}
ClusterKey generate_cluster_key() { unavailable("a cluster key (CURVE)"); }
void save_cluster_key(const ClusterKey&, const std::string&) { unavailable("a cluster key (CURVE)"); }
ClusterKey load_cluster_key(const std::string&) { unavailable("a cluster key (CURVE)"); }

}  // namespace frugal::comm
