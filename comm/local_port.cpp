#include "comm/local_port.h"

#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "core/check.h"
#include "core/regular_file.h"

namespace frugal::comm {

namespace {

// Binds a TCP socket to 127.0.0.1:port (0: a port the kernel picks) and closes it again; returns
// the port bound, or 0 when it was taken.
int try_port(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

}  // namespace

// Random, so that runs starting at the same time pick different ports.
int free_local_port() {
  int ephemeral_low = 32768;
  try {
    std::FILE* f = fopen_regular_file("/proc/sys/net/ipv4/ip_local_port_range", "the kernel's port range");
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 1024) ephemeral_low = lo;
    std::fclose(f);
  } catch (const Error&) {
    // no /proc: the usual range
  }
  constexpr int kLowest = 10000;
  if (ephemeral_low - kLowest >= 1000) {
    for (int attempt = 0; attempt < 64; ++attempt) {
      uint32_t r = 0;
      if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) break;
      const int port = kLowest + static_cast<int>(r % static_cast<uint32_t>(ephemeral_low - kLowest));
      if (try_port(port) == port) return port;
    }
  }
  const int port = try_port(0);
  FRUGAL_CHECK(port > 0, "cannot find a free TCP port on 127.0.0.1");
  return port;
}

}  // namespace frugal::comm
