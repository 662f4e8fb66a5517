#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {

const char* kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

fs::file_type type_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return fs::file_type::regular;
  if (S_ISDIR(mode)) return fs::file_type::directory;
  if (S_ISCHR(mode)) return fs::file_type::character;
  if (S_ISBLK(mode)) return fs::file_type::block;
  if (S_ISFIFO(mode)) return fs::file_type::fifo;
  if (S_ISSOCK(mode)) return fs::file_type::socket;
  return fs::file_type::unknown;
}

}  // namespace

void require_regular_file(const fs::path& path, const std::string& what) {
  if (path.empty()) throw Error(fmt::format("a path of no name given where {} is expected", what));
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    if (fs::is_symlink(fs::symlink_status(path, ec)))
      throw Error(fmt::format("{}: a symlink to nothing (expected {})", path.string(), what));
    throw Error(fmt::format("{}: no such file (expected {})", path.string(), what));
  }
  if (ec) throw Error(fmt::format("{}: cannot be examined: {} (expected {})", path.string(), ec.message(), what));
  if (status.type() != fs::file_type::regular)
    throw Error(fmt::format("{}: {}, expected {}", path.string(), kind_of(status.type()), what));
}

std::ifstream open_regular_file(const fs::path& path, const std::string& what, std::ios::openmode mode) {
  require_regular_file(path, what);
  errno = 0;
  std::ifstream in(path, mode | std::ios::in);
  if (!in)
    throw Error(fmt::format("{}: cannot open for reading{} (expected {})", path.string(),
                            errno != 0 ? fmt::format(": {}", std::strerror(errno)) : std::string(), what));
  return in;
}

int open_regular_fd(const fs::path& path, const std::string& what) {
  require_regular_file(path, what);
  // O_NONBLOCK: should the path have become a FIFO since the check, the open returns at once (and the
  // type seen on the descriptor refuses it) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error(fmt::format("{}: cannot open for reading: {} (expected {})", path.string(), std::strerror(errno), what));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: {}, expected {}", path.string(), kind_of(type_of_mode(st.st_mode)), what));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::FILE* fopen_regular_file(const fs::path& path, const std::string& what) {
  const int fd = open_regular_fd(path, what);
  std::FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    const int error = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot open for reading: {} (expected {})", path.string(), std::strerror(error), what));
  }
  return f;
}

std::string read_regular_file(const fs::path& path, const std::string& what, uintmax_t max_bytes) {
  require_regular_file(path, what);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw Error(fmt::format("{}: {} bytes, more than {} can be ({} at most)", path.string(), size, what, max_bytes));
  std::ifstream in = open_regular_file(path, what);
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read failed", path.string()));
  return s.str();
}

}  // namespace frugal
