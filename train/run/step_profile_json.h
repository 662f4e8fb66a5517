// The "profile" object of a metrics file's epoch line: where a rank's training steps spent their
// time and the work each phase did (core/step_profile.h), written by `frugal train` and read by
// `frugal bench roofline`.
//   "profile": {"samples": N, "seconds": S,
//               "phases": {"input_forward": {"seconds": s, "flops": f, "bytes": b, "gathered_bytes": g}, ...}}
// Totals over the epoch on this rank; samples: the points this rank's steps processed.
#pragma once

#include <cstddef>

#include <nlohmann/json_fwd.hpp>

#include "core/step_profile.h"

namespace frugal::run {

nlohmann::json profile_to_json(const profile::StepProfile& p, size_t samples);
// The inverse; a phase the object lacks stays zero, an unknown phase name is an error naming it.
profile::StepProfile profile_from_json(const nlohmann::json& j, size_t& samples);

}  // namespace frugal::run
