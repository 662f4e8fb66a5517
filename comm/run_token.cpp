#include "comm/run_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

std::string new_run_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    FRUGAL_CHECK(n > 0, fmt::format("cannot read random bytes for the run token: {}", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (const unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace frugal::comm
