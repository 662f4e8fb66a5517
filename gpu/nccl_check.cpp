#include "gpu/nccl_check.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "gpu/nccl_communicator.h"

namespace frugal::gpu {
namespace detail {

std::vector<int32_t> gather_devices(comm::Communicator& host, int device) {
  const int32_t mine = device >= 0 ? device : -1;
  std::vector<std::vector<std::byte>> all;
  host.all_gather_bytes(std::as_bytes(std::span<const int32_t>(&mine, 1)), all).wait();
  std::vector<int32_t> devices(all.size(), -1);
  for (size_t r = 0; r < all.size(); ++r) {
    FRUGAL_CHECK(all[r].size() == sizeof(int32_t),
                 fmt::format("NCCL set-up: rank {} sent {} bytes for its device index, not {}", r, all[r].size(),
                             sizeof(int32_t)));
    std::memcpy(&devices[r], all[r].data(), sizeof(int32_t));
  }
  return devices;
}

void require_nccl(comm::Communicator& host, int device) {
  const std::vector<int32_t> devices = gather_devices(host, device);
  std::vector<size_t> without;
  for (size_t r = 0; r < devices.size(); ++r)
    if (devices[r] < 0) without.push_back(r);
  FRUGAL_CHECK(without.empty(),
               fmt::format("--dp-transport nccl: rank(s) {} of the data-parallel group run on the CPU (no CUDA "
                           "device); NCCL needs --device cuda on every replica (or --dp-transport host)",
                           fmt::join(without, ", ")));
  FRUGAL_CHECK(nccl_built(), "--dp-transport nccl: this frugal was built without NCCL (a CUDA build finds it as "
                             "nccl.h and libnccl in the CUDA toolkit); use --dp-transport host");
}

}  // namespace detail

bool nccl_usable(comm::Communicator& host, int device) {
  const std::vector<int32_t> devices = detail::gather_devices(host, device);
  if (!nccl_built()) return false;
  for (int32_t d : devices)
    if (d < 0) return false;
  return true;
}

}  // namespace frugal::gpu
