// A NetworkSpec as the "config" object of a checkpoint's manifest (and of `frugal train`'s run
// configuration): the keys features, labels, hidden, sampler, hash, k, tables, bucket, seed, plus
// layers and format when they differ from the defaults. Other settings (DWTA bin size, active-set
// bounds, rebuild schedule) are not recorded; they only matter to LSH training, not to inference.
// Internal header (json): not installed.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "layers/network_spec.h"

namespace frugal::layers {

nlohmann::json network_config(const NetworkSpec& spec);
// `where` names the manifest in errors (a missing or mistyped key).
NetworkSpec network_spec_from_config(const nlohmann::json& config, const std::string& where);

}  // namespace frugal::layers
