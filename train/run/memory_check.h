// Before a model is allocated: the bytes its weights alone take on this rank, against --memory-limit
// (MiB; 0: what this machine still has, core/host_memory.h). A model that cannot fit (--hidden 1e9,
// --embedding-dim 1e9, a header declaring 2^32 - 1 labels) is refused naming its size and the flags
// that set it, where allocating it would end in std::bad_alloc or the OOM killer.
#pragma once

#include <string>

namespace frugal::run {

// Throws frugal::Error when `bytes` (what `what` describes, e.g. "39,000 x 512 + 512 x 1,000,000 weights")
// exceed the limit; `fix` says which flags make it smaller.
void check_model_memory(double bytes, const std::string& what, double limit_mib, const std::string& fix);

}  // namespace frugal::run
