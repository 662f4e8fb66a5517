#include "core/regular_file.h"

#include <fstream>
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

}  // namespace

void require_regular_file(const fs::path& path, const std::string& what) {
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

std::string read_regular_file(const fs::path& path, const std::string& what, uintmax_t max_bytes) {
  require_regular_file(path, what);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw Error(fmt::format("{}: {} bytes, more than {} can be ({} at most)", path.string(), size, what, max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open for reading (expected {})", path.string(), what));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read failed", path.string()));
  return s.str();
}

}  // namespace frugal
