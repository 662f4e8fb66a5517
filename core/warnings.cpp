#include "core/warnings.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>

#include "core/check.h"
#include "core/output.h"

namespace frugal {
namespace {
std::atomic<bool> g_strict{false};
std::mutex g_mutex;
std::vector<std::string> g_pending;
}  // namespace

void set_strict_warnings(bool strict) { g_strict.store(strict); }
bool strict_warnings() { return g_strict.load(); }

void warn(const std::string& message) {
  if (g_strict.load()) throw Error(message + " (--strict makes warnings errors)");
  write_output(OutputStream::notice, "frugal: warning: " + message + "\n");
  std::lock_guard lock(g_mutex);
  g_pending.push_back(message);
}

std::vector<std::string> take_warnings() {
  std::lock_guard lock(g_mutex);
  return std::exchange(g_pending, {});
}

}  // namespace frugal
