// LocalCommunicator: N ranks as threads of one process, exchanging frames through memory. Runs the
// same collective algorithms as the ZeroMQ backend, so tests of those need no network.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/communicator.h"

namespace frugal::comm {

// One communicator per rank; hand communicator r to the thread that plays rank r.
std::vector<std::unique_ptr<Communicator>> make_local_communicators(int n,
                                                                    CollectiveTuning tuning = {});

// Runs fn(comm) for ranks 0..n-1 on n threads (each with its error rank set) and rethrows the
// first exception once all finished. A rank that throws aborts the others' communicators, so they
// fail with "rank N failed: ..." instead of waiting for it forever.
void run_local(int n, const std::function<void(Communicator&)>& fn, CollectiveTuning tuning = {});

}  // namespace frugal::comm
