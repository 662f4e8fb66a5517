// Suspicious but valid input (a label id far above the rest, a feature value beyond any sane scale,
// a class with a single point): frugal says so and goes on, or, under --strict, stops. Warnings go to
// stderr as "frugal: warning: ..." and are kept for the run's metrics log ({"event": "warning"}).
#pragma once

#include <string>
#include <vector>

namespace frugal {

// --strict: every later warning is a frugal::Error instead.
void set_strict_warnings(bool strict);
bool strict_warnings();

// Prints the warning and keeps it (for take_warnings); throws frugal::Error under --strict.
void warn(const std::string& message);

// The warnings since the last call, oldest first (the metrics log records them).
std::vector<std::string> take_warnings();

}  // namespace frugal
