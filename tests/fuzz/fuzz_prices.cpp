// libFuzzer target: `frugal plan --prices FILE` (apps/plan/node_prices.h). Every input is read or refused
// with frugal::Error naming FILE:LINE in frugal's words; a node type that is accepted has a name,
// positive cores, non-negative memory and price, finite numbers and a measured speed (when given)
// above 0: what the planner divides by and sorts on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "apps/plan/node_prices.h"
#include "core/check.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = fuzz_input_file("prices", text);
  try {
    for (const auto& n : frugal::cli::read_node_prices(path)) {
      if (n.name.empty() || !(n.cores > 0) || !std::isfinite(n.cores) || !(n.memory_gib >= 0) ||
          !std::isfinite(n.memory_gib) || !(n.usd_per_hour >= 0) || !std::isfinite(n.usd_per_hour))
        __builtin_trap();
      if (n.samples_per_s && (!(*n.samples_per_s > 0) || !std::isfinite(*n.samples_per_s))) __builtin_trap();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, text);
  }
  return 0;
}
