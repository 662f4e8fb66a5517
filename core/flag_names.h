// The library names option fields in its errors ("SynthXmcOptions::features must be > 0"), never
// flags; a face that knows which flag fills which field rethrows the error naming the flag instead
// ("synth-xmc: --features must be > 0").
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"

namespace frugal {

// Option field -> the flag that fills it, e.g. {"SynthXmcOptions::features", "--features"}.
using FlagNames = std::vector<std::pair<std::string_view, std::string_view>>;

// Runs `body`; a frugal::Error whose message names a field of `names` is rethrown with the flags'
// names instead, after `prefix` (e.g. "synth-xmc: "). Other errors pass unchanged.
template <class F>
void with_flag_names(FlagNames names, std::string_view prefix, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    // Longest first: LshOptions::rebuild_first must not be taken for a shorter field it starts with.
    std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    std::string what = e.what();
    bool named = false;
    for (const auto& [field, flag] : names) {
      for (size_t at = what.find(field); at != std::string::npos; at = what.find(field, at + flag.size())) {
        what.replace(at, field.size(), flag);
        named = true;
      }
    }
    if (!named) throw;
    throw Error(std::string(prefix) + what);
  }
}

}  // namespace frugal
