// The NCCL data-parallel group's set-up check (gpu/nccl_check.h), which runs on every machine: the
// ranks gather their devices, and unless every one has a GPU (and the build has NCCL) every rank
// fails with the same message naming the ranks without one; nccl_usable (--dp-transport auto)
// gives the same answer on every rank. The NCCL collectives themselves need a GPU: they are
// checked in cuda_end_to_end.
#include <catch2/catch.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "gpu/nccl_communicator.h"

using namespace frugal;

TEST_CASE("nccl group: a replica without a GPU makes every rank fail naming it") {
  std::mutex mu;
  std::vector<std::string> errors(3);
  comm::run_local(3, [&](comm::Communicator& c) {
    const int device = c.rank() == 0 ? 0 : -1;  // ranks 1 and 2 run on the CPU
    try {
      gpu::make_nccl_communicator(c.split(0, c.rank()), device, 5.0);  // the wrapper owns its host group
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[static_cast<size_t>(c.rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    INFO(e);
    CHECK(e.find("--dp-transport nccl: rank(s) 1, 2 of the data-parallel group run on the CPU") != std::string::npos);
  }
}

TEST_CASE("nccl group: --dp-transport auto decides the same on every rank") {
  for (const bool all_have_gpus : {false, true}) {
    std::mutex mu;
    std::vector<int> usable;
    comm::run_local(2, [&](comm::Communicator& c) {
      const int device = all_have_gpus || c.rank() == 0 ? 0 : -1;
      const bool u = gpu::nccl_usable(c, device);
      std::lock_guard<std::mutex> lock(mu);
      usable.push_back(u ? 1 : 0);
    });
    REQUIRE(usable.size() == 2);
    CHECK(usable[0] == usable[1]);
    // No CUDA call is made: with a device everywhere, the answer is whether the build has NCCL.
    CHECK(usable[0] == (all_have_gpus && gpu::nccl_built() ? 1 : 0));
  }
}
