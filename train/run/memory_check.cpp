#include "train/run/memory_check.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/host_memory.h"

namespace frugal::run {
namespace {

std::string human(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t u = 0;
  while (bytes >= 1024.0 && u + 1 < std::size(units)) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

}  // namespace

std::optional<MemoryBudget> memory_budget(double limit_mib) {
  if (limit_mib > 0) return MemoryBudget{limit_mib * 1048576.0, fmt::format("--memory-limit {:g} MiB allows", limit_mib)};
  if (const auto available = host_memory_available())
    return MemoryBudget{static_cast<double>(*available), "this machine has available"};
  return std::nullopt;
}

void check_model_memory(double bytes, const std::string& what, double limit_mib, const std::string& fix) {
  const std::optional<MemoryBudget> budget = memory_budget(limit_mib);
  if (!budget || bytes <= budget->bytes) return;  // fits, or no figure to compare with
  throw Error(fmt::format("the model needs at least {} on this rank ({}), more than the {} {}: {}, or raise "
                          "--memory-limit",
                          human(bytes), what, human(budget->bytes), budget->source, fix));
}

bool choose_streaming(std::optional<bool> given, const std::string& train, bool packed, double bytes_held,
                      double memory_limit_mib) {
  if (given.has_value() && !*given) return false;
  if (!packed) {
    FRUGAL_CHECK(!given.value_or(false),
                 fmt::format("--stream on: {} is a text file; streaming reads the packed form (frugal data pack {} "
                             "{}.fpk, then --train {}.fpk)",
                             train, train, train, train));
    return false;
  }
  if (given.value_or(false)) return true;
  const std::optional<MemoryBudget> budget = memory_budget(memory_limit_mib);
  return budget && budget->bytes > 0 && bytes_held > 0.5 * budget->bytes;
}

}  // namespace frugal::run
