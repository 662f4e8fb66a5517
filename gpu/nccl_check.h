// The check every NCCL group starts with (gpu/nccl_communicator.h), shared by the builds with and
// without NCCL so that both fail the same way on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "core/communicator.h"

namespace frugal::gpu::detail {

// Collective over `host`: every rank's CUDA device index (-1: none), in rank order.
std::vector<int32_t> gather_devices(comm::Communicator& host, int device);

// Collective over `host`: throws the same frugal::Error on every rank unless every rank has a
// device and the build has NCCL; the message names the ranks without one.
void require_nccl(comm::Communicator& host, int device);

}  // namespace frugal::gpu::detail
