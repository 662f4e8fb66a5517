#include "train/run/step_profile_json.h"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace frugal::run {

nlohmann::json profile_to_json(const profile::StepProfile& p, size_t samples) {
  nlohmann::json phases = nlohmann::json::object();
  for (size_t i = 0; i < profile::kPhases; ++i) {
    const auto phase = static_cast<profile::Phase>(i);
    const profile::PhaseTotals& t = p[phase];
    phases[std::string(profile::phase_name(phase))] = {
        {"seconds", t.seconds}, {"flops", t.flops}, {"bytes", t.bytes}, {"gathered_bytes", t.gathered_bytes}};
  }
  return {{"samples", samples}, {"seconds", p.seconds()}, {"phases", phases}};
}

profile::StepProfile profile_from_json(const nlohmann::json& j, size_t& samples) {
  FRUGAL_CHECK(j.is_object() && j.contains("samples") && j.contains("phases") && j["phases"].is_object(),
               "a profile needs \"samples\" and a \"phases\" object");
  samples = j["samples"].get<size_t>();
  profile::StepProfile p;
  for (const auto& [name, totals] : j["phases"].items()) {
    size_t index = profile::kPhases;
    for (size_t i = 0; i < profile::kPhases; ++i)
      if (profile::phase_name(static_cast<profile::Phase>(i)) == name) index = i;
    FRUGAL_CHECK(index < profile::kPhases, fmt::format("unknown profile phase \"{}\"", name));
    profile::PhaseTotals& t = p.phases[index];
    t.seconds = totals.value("seconds", 0.0);
    t.flops = totals.value("flops", 0.0);
    t.bytes = totals.value("bytes", 0.0);
    t.gathered_bytes = totals.value("gathered_bytes", 0.0);
  }
  return p;
}

}  // namespace frugal::run
