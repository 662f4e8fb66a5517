// Learning-rate schedule: the factor by which the base learning rate is multiplied at each step.
// It depends on the global step alone (no state), so a resumed run continues bit-identically and a
// catch-up optimizer can ask for the learning rate of any past step.
//
// warmup_steps N: the factor rises linearly, (i + 1) / N at step i (0-based), so the first step
// already moves and step N - 1 is at the full rate. Then, over the remaining steps up to
// total_steps T, with p = (i - N) / (T - N):
//   constant: 1;   linear: 1 - p;   cosine: (1 + cos(pi p)) / 2.
// The decay ends at 0 just after the last step (the last step still has a small positive rate,
// (1 / (T - N)) for linear); steps past T stay at 0.
#pragma once

#include <cstdint>
#include <string>

namespace frugal::optim {

enum class ScheduleKind { constant, linear, cosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::constant;
  uint64_t warmup_steps = 0;
  // Steps of the whole run (epochs x steps per epoch); needed by linear and cosine.
  uint64_t total_steps = 0;
  void validate() const;
  // The factor at 0-based global step `step` (the number of steps taken before it).
  double factor(uint64_t step) const;
};

std::string to_string(ScheduleKind kind);
// "constant", "linear" or "cosine"; anything else throws naming the accepted values.
ScheduleKind schedule_kind_from_string(const std::string& name);

}  // namespace frugal::optim
