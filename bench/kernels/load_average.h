// The first line of /proc/loadavg (or "unknown"): every kernel benchmark prints it beside its
// figures, since 2 shared cores make a timing meaningless when something else is running.
#pragma once

#include <cstdio>
#include <string>

namespace frugal::bench {

inline std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  char line[128] = {};
  const bool ok = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  std::string s = ok ? line : "unknown";
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace frugal::bench
