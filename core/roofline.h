// Roofline: how close each phase of a training step comes to what the machine allows. A phase that
// did F flops and moved S bytes by streaming and G bytes by gathering rows at scattered positions
// (core/step_profile.h) in T seconds cannot take less than max(F / peak flop rate, S / streaming
// bandwidth + G / gather bandwidth); that bound is its roof time, the larger term names what bounds
// it (memory: "gather" when the gathered bytes take most of the memory time), and roof time / T is
// the fraction of the roof it reaches.
#pragma once

#include <string>
#include <vector>

#include "core/step_profile.h"

namespace frugal::profile {

// What the machine reaches, measured (kernels/machine_probe.h, `frugal bench roofline`).
struct MachineRoofs {
  double flops_per_s = 0.0;
  double stream_bytes_per_s = 0.0;
  double gather_bytes_per_s = 0.0;
};

struct RooflinePhase {
  Phase phase = Phase::other;
  double seconds = 0.0, flops = 0.0, bytes = 0.0, gathered_bytes = 0.0;  // per sample
  double roof_seconds = 0.0;  // per sample: max(compute time, memory time) at the machine's rates
  std::string bound;          // "compute", "memory (gather)", "memory (stream)", or "" (no work counted)
  double fraction() const { return seconds > 0.0 ? roof_seconds / seconds : 0.0; }
  double flops_per_s() const { return seconds > 0.0 ? flops / seconds : 0.0; }
  double bytes_per_s() const { return seconds > 0.0 ? bytes / seconds : 0.0; }
};

struct Roofline {
  std::vector<RooflinePhase> phases;  // every phase with time or work, in Phase order
  double seconds = 0.0, roof_seconds = 0.0;  // per sample, whole step
  double fraction() const { return seconds > 0.0 ? roof_seconds / seconds : 0.0; }
  // The counted phases' share of the step time (the rest: waits and uncounted work).
  double counted_seconds = 0.0;
};

Roofline roofline(const StepProfile& profile, size_t samples, const MachineRoofs& machine);

}  // namespace frugal::profile
