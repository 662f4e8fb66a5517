#include "core/roofline.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::profile {

Roofline roofline(const StepProfile& profile, size_t samples, const MachineRoofs& machine) {
  FRUGAL_CHECK(samples > 0, "roofline: the profile covers no samples");
  FRUGAL_CHECK(machine.flops_per_s > 0 && machine.stream_bytes_per_s > 0 && machine.gather_bytes_per_s > 0,
               "roofline: the machine's peak rates must be positive (run the probe)");
  const double n = static_cast<double>(samples);
  Roofline r;
  for (size_t i = 0; i < kPhases; ++i) {
    const auto phase = static_cast<Phase>(i);
    const PhaseTotals& t = profile[phase];
    if (t.seconds <= 0.0 && t.flops <= 0.0 && t.bytes <= 0.0) continue;
    RooflinePhase p;
    p.phase = phase;
    p.seconds = t.seconds / n;
    p.flops = t.flops / n;
    p.bytes = t.bytes / n;
    p.gathered_bytes = std::min(t.gathered_bytes, t.bytes) / n;
    r.seconds += p.seconds;
    if (p.flops > 0.0 || p.bytes > 0.0) {
      const double compute = p.flops / machine.flops_per_s;
      const double streamed = (p.bytes - p.gathered_bytes) / machine.stream_bytes_per_s;
      const double gathered = p.gathered_bytes / machine.gather_bytes_per_s;
      p.roof_seconds = std::max(compute, streamed + gathered);
      p.bound = compute >= streamed + gathered ? "compute" : gathered >= streamed ? "memory (gather)" : "memory (stream)";
      r.roof_seconds += p.roof_seconds;
      r.counted_seconds += p.seconds;
    }
    r.phases.push_back(p);
  }
  return r;
}

}  // namespace frugal::profile
