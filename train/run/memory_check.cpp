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

void check_model_memory(double bytes, const std::string& what, double limit_mib, const std::string& fix) {
  double limit = 0;
  std::string source;
  if (limit_mib > 0) {
    limit = limit_mib * 1048576.0;
    source = fmt::format("--memory-limit {:g} MiB allows", limit_mib);
  } else if (const auto available = host_memory_available()) {
    limit = static_cast<double>(*available);
    source = "this machine has available";
  } else {
    return;  // no figure to compare with (not Linux)
  }
  if (bytes <= limit) return;
  throw Error(fmt::format("the model needs at least {} on this rank ({}), more than the {} {}: {}, or raise "
                          "--memory-limit",
                          human(bytes), what, human(limit), source, fix));
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
  const std::optional<uint64_t> available = host_memory_available();
  const double budget = memory_limit_mib > 0 ? memory_limit_mib * 1048576.0
                        : available          ? static_cast<double>(*available)
                                             : 0.0;
  return budget > 0 && bytes_held > 0.5 * budget;
}

}  // namespace frugal::run
