#include "comm/exchange.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

void ThresholdOptions::validate() const {
  FRUGAL_CHECK(keep > 0.0f && keep <= 1.0f, fmt::format("threshold: keep must be in (0, 1], got {}", keep));
  FRUGAL_CHECK(reestimate_every >= 1, "threshold: reestimate_every must be >= 1");
  FRUGAL_CHECK(exact || sample_size >= 1, "threshold: sample_size must be >= 1");
  FRUGAL_CHECK(momentum >= 0.0f && momentum < 1.0f && momentum_scale > 0.0f && std::isfinite(momentum_scale),
               fmt::format("threshold: momentum must be in [0, 1) and its scale > 0, got {} and {}", momentum,
                           momentum_scale));
  FRUGAL_CHECK(auto_energy >= 0.0f && auto_energy < 1.0f,
               fmt::format("threshold: the automatic keep's energy target must be in [0, 1), got {}", auto_energy));
  FRUGAL_CHECK(explore >= 0.0f && explore < 1.0f,
               fmt::format("threshold: the exploration fraction must be in [0, 1), got {}", explore));
}

float ThresholdOptions::keep_at(uint64_t step) const {
  if (step >= warmup_steps || keep >= 1.0f) return keep;
  return static_cast<float>(std::pow(static_cast<double>(keep), static_cast<double>(step) / static_cast<double>(warmup_steps)));
}

void MpCompression::validate() const {
  FRUGAL_CHECK(keep > 0.0 && (keep <= 1.0 || keep == std::floor(keep)),
               fmt::format("MpCompression::keep {}: expected a fraction in (0, 1] or a whole count of activations",
                           keep));
  FRUGAL_CHECK(mass > 0.0 && mass <= 1.0, fmt::format("MpCompression::mass {}: expected a fraction in (0, 1]", mass));
  FRUGAL_CHECK(wire != ValueType::sign && static_cast<uint8_t>(wire) <= 4,
               "MpCompression::wire: unknown value type (sign values are for DCT-DP's thresholded gradients only)");
}

size_t MpCompression::kept_of(size_t width, uint64_t step) const {
  const bool warming = step < warmup_steps;
  if (keep > 1.0 && !warming) return std::min(width, static_cast<size_t>(keep));
  double fraction = keep > 1.0 ? std::min(1.0, keep / static_cast<double>(width)) : keep;
  if (warming)  // geometric from 1 (step 0) towards `fraction` (step warmup_steps)
    fraction = std::pow(fraction, static_cast<double>(step) / static_cast<double>(warmup_steps));
  // keep arrives from text as a double (0.1 is 0.1000000000000000055): shave the representation
  // error so that 10% of 1000 is 100 positions, not 101.
  const auto k = static_cast<size_t>(std::ceil(fraction * static_cast<double>(width) * (1.0 - 1e-12)));
  return std::clamp<size_t>(k, 1, width);
}

const char* to_string(StraightThrough mode) {
  return mode == StraightThrough::off ? "off" : mode == StraightThrough::input ? "input" : "all";
}

const char* to_string(DpTarget target) { return target == DpTarget::updates ? "updates" : "gradients"; }

void DpCompression::validate() const {
  ThresholdOptions{.keep = keep, .reestimate_every = reestimate_every, .exact = exact_tau,
                   .sample_size = sample_size, .seed = seed, .auto_energy = auto_energy, .explore = explore}
      .validate();
  FRUGAL_CHECK(explore == 0.0f || wire != ValueType::sign,
               "dp compression: exploration sends values (sign values share one scale over the selection)");
  FRUGAL_CHECK(!per_row || wire != ValueType::sign, "dp compression: per-row selection sends values, not signs "
                                                    "(sign values share one scale over the whole selection)");
  FRUGAL_CHECK(static_cast<uint8_t>(wire) <= 3, "dp compression: unknown wire value type (i8 is for DCT-MP's "
                                                 "activations only)");
  FRUGAL_CHECK(target == DpTarget::gradients || (!momentum_correction && !local_clipping),
               "dp compression: momentum correction and local clipping act on gradients; with exchanged updates "
               "each replica's optimizer already sees every local gradient");
  for (const KeepOverride& o : per_parameter) {
    FRUGAL_CHECK(!o.prefix.empty(), "DpCompression::per_parameter: an empty parameter name prefix");
    FRUGAL_CHECK(o.keep > 0.0f && o.keep <= 1.0f, fmt::format("DpCompression::per_parameter: keep {} for '{}': "
                                                              "expected a fraction in (0, 1]", o.keep, o.prefix));
  }
}

float DpCompression::keep_for(std::string_view parameter) const {
  for (const KeepOverride& o : per_parameter)
    if (parameter.starts_with(o.prefix)) return o.keep;
  return keep;
}

ThresholderState ReplicaReducer::feedback_state(size_t param) const {
  throw Error(fmt::format("this replica reducer carries no error feedback (asked for parameter {})", param));
}

void ReplicaReducer::restore_feedback(size_t param, const ThresholderState&) {
  throw Error(fmt::format("this replica reducer carries no error feedback (asked to restore parameter {})", param));
}

}  // namespace frugal::comm
