// A build without NCCL (no CUDA, or a toolkit without nccl.h): --dp-transport nccl fails on every
// rank with the same message (gpu/nccl_check.cpp), auto keeps the host transport.
#include "gpu/nccl_check.h"
#include "gpu/nccl_communicator.h"

namespace frugal::gpu {

bool nccl_built() { return false; }

std::unique_ptr<comm::Communicator> make_nccl_communicator(std::unique_ptr<comm::Communicator> host, int device,
                                                           double /*timeout_seconds*/) {
  detail::require_nccl(*host, device);  // throws: no NCCL in this build
  return host;
}

}  // namespace frugal::gpu
