#include "train/run/dp_transport.h"
#include "core/say.h"

#include <fmt/format.h>

#include "core/backend.h"
#include "core/device.h"
#include "gpu/nccl_communicator.h"

namespace frugal::run {
std::string_view to_string(DpTransport t) {
  switch (t) {
    case DpTransport::host: return "host";
    case DpTransport::nccl: return "nccl";
    case DpTransport::auto_: return "auto";
  }
  return "?";
}

std::unique_ptr<comm::Communicator> data_parallel_group(DpTransport transport, const Backend& backend,
                                                        std::unique_ptr<comm::Communicator> group,
                                                        double comm_timeout_seconds, bool speak) {
  if (!comm::is_active(group.get())) {
    if (transport == DpTransport::nccl && speak)
      say("--dp-transport nccl: ignored, there is no data-parallel group (--grid DxM with D > 1 makes one)\n");
    return group;
  }
  // The CUDA backend drives one device, device 0 of what the process sees (core/device.h).
  const int device = is_gpu(device_name(backend)) ? 0 : -1;
  if (transport == DpTransport::host) return group;
  if (transport == DpTransport::auto_ && !gpu::nccl_usable(*group, device)) return group;
  const int replicas = group->size();
  auto nccl = gpu::make_nccl_communicator(std::move(group), device, comm_timeout_seconds);
  if (speak) say("data-parallel gradient sums over NCCL between {} GPU replicas\n", replicas);
  return nccl;
}

}  // namespace frugal::run
