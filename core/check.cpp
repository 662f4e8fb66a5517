#include "core/check.h"

#include <atomic>

#include <fmt/format.h>

namespace frugal {
namespace {
std::atomic<int> g_rank{0};
// Threads that stand for ranks in one process (LocalCommunicator) set their own.
thread_local int t_rank = -1;
}  // namespace

void set_error_rank(int rank) {
  t_rank = rank;
  g_rank.store(rank);
}

int error_rank() { return t_rank >= 0 ? t_rank : g_rank.load(); }

void throw_check_failure(const char* file, int line, const char* condition,
                         const std::string& message) {
  throw Error(message, fmt::format("{}:{}, rank {}, check `{}`", file, line, error_rank(), condition));
}

}  // namespace frugal
