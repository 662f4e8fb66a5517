// --dp-transport: what carries the data-parallel group's gradient sums. host: the world's transport
// (ZeroMQ, MPI or threads); nccl: NCCL between the replicas' GPUs (gpu/nccl_communicator.h), every
// replica on --device cuda; auto: nccl when every replica runs on a GPU and the build has NCCL,
// else host (the choice is collective: every replica makes the same one).
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "core/communicator.h"

namespace frugal {

class Backend;

namespace run {

enum class DpTransport { host, nccl, auto_ };
std::string_view to_string(DpTransport t);

// The data-parallel group to train with: `group` itself, or an NCCL group wrapping it. Collective
// over `group` (when it has more than one rank). `comm_timeout_seconds`: the run's peer timeout
// (comm::comm_timeout_seconds): how long an NCCL collective may take before the group is aborted.
// `say`: whether this rank prints the choice.
std::unique_ptr<comm::Communicator> data_parallel_group(DpTransport transport, const Backend& backend,
                                                        std::unique_ptr<comm::Communicator> group,
                                                        double comm_timeout_seconds, bool speak);

}  // namespace run
}  // namespace frugal
