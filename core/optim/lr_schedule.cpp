#include "core/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::optim {

void LrSchedule::validate() const {
  if (kind == ScheduleKind::constant) return;
  FRUGAL_CHECK(total_steps > 0, fmt::format("learning-rate schedule {}: total_steps must be set (epochs x steps per "
                                            "epoch)",
                                            to_string(kind)));
  FRUGAL_CHECK(warmup_steps < total_steps,
               fmt::format("learning-rate schedule {}: warmup_steps {} leave no steps to decay over (total_steps {})",
                           to_string(kind), warmup_steps, total_steps));
}

double LrSchedule::factor(uint64_t step) const {
  if (step < warmup_steps) return static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == ScheduleKind::constant) return 1.0;
  const double p = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps));
  if (kind == ScheduleKind::linear) return 1.0 - p;
  return 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::cosine: return "cosine";
  }
  return "?";
}

ScheduleKind schedule_kind_from_string(const std::string& name) {
  for (const auto k : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::cosine})
    if (to_string(k) == name) return k;
  throw Error(fmt::format("unknown learning-rate schedule '{}': expected constant, linear or cosine", name));
}

}  // namespace frugal::optim
