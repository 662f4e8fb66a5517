// NCCL for the data-parallel group (`frugal train --dp-transport nccl|auto`): a Communicator whose
// float collectives (all_reduce, all_gatherv, reduce_scatterv, broadcast) run over NCCL between the
// replicas' GPUs, while everything else (byte collectives, barriers, point to point) and NCCL's own
// set-up go through the host communicator it wraps (ZeroMQ, MPI or threads). The replica reducers
// (comm/replica_reducer.h) use it unchanged: their gradients live in host memory, so every
// collective is staged host -> pinned buffer -> device -> NCCL -> device -> pinned -> host, and the
// byte accounting stays the ring model of core/comm_stats.h.
//
// libnccl is loaded when the first NCCL group is made (dlopen), not linked: a CPU node runs the same
// binary without it. No CUDA or NCCL header here.
#pragma once

#include <memory>
#include <string>

#include "core/communicator.h"

namespace frugal::gpu {

// Whether this build has the NCCL transport (a CUDA build whose toolkit has nccl.h).
bool nccl_built();

// Collective over `host`: whether every rank has a CUDA device (`device` >= 0 is this rank's device
// index, -1 none) and the build has NCCL. The answer is the same on every rank.
bool nccl_usable(comm::Communicator& host, int device);

// Collective over `host`: NCCL among its ranks on device `device` (this rank's CUDA device, -1 when
// it has none). When a rank has no device, or the build has no NCCL, every rank throws the same
// frugal::Error naming the ranks. A collective that has not finished after `timeout_seconds`
// aborts the NCCL group and fails (a dead or stuck replica), as the host transports do.
std::unique_ptr<comm::Communicator> make_nccl_communicator(std::unique_ptr<comm::Communicator> host, int device,
                                                           double timeout_seconds);

}  // namespace frugal::gpu
