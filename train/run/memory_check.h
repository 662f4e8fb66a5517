// Before a model is allocated: the bytes its weights alone take on this rank, against --memory-limit
// (MiB; 0: what this machine still has, core/host_memory.h). A model that cannot fit (--hidden 1e9,
// --embedding-dim 1e9, a header declaring 2^32 - 1 labels) is refused naming its size and the flags
// that set it, where allocating it would end in std::bad_alloc or the OOM killer.
#pragma once

#include <optional>
#include <string>

namespace frugal::run {

// What a rank may use: --memory-limit MiB when given (above 0), else what this machine has available,
// and how the log names it; unset where neither is known (not Linux).
struct MemoryBudget {
  double bytes = 0.0;
  std::string source;  // "--memory-limit 4096 MiB allows" / "this machine has available"
};
std::optional<MemoryBudget> memory_budget(double limit_mib);

// Throws frugal::Error when `bytes` (what `what` describes, e.g. "39,000 x 512 + 512 x 1,000,000 weights")
// exceed the limit; `fix` says which flags make it smaller.
void check_model_memory(double bytes, const std::string& what, double limit_mib, const std::string& fix);

// Whether a run streams its training set `train` from disk rather than holding it, for every trainer
// that streams (DLRM's click logs, the XMC network's points): `given` --stream (unset: auto);
// `packed`: the file is in packed form (`frugal data pack`); `bytes_held`: what holding the set would
// take. Auto streams a packed file whose set would take more than half of --memory-limit (MiB; 0: what
// the machine has available). --stream on with a text file is refused, naming the pack command.
bool choose_streaming(std::optional<bool> given, const std::string& train, bool packed, double bytes_held,
                      double memory_limit_mib);

}  // namespace frugal::run
