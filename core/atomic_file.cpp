#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error(fmt::format("{}: cannot open to sync", p.string()));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("{}: fsync failed", p.string()));
}

}  // namespace

void write_atomically(const fs::path& target, const std::string& bytes) {
  const fs::path tmp = target.string() + ".tmp";
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error(fmt::format("{}: cannot open for writing", tmp.string()));
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.flush();
      if (!out) throw Error(fmt::format("{}: write failed (disk full?)", tmp.string()));
    }
    fsync_path(tmp, false);
    fs::rename(tmp, target);
  } catch (...) {
    // A failed write leaves no temporary file behind (the target keeps its old content).
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fsync_path(target.parent_path().empty() ? fs::path(".") : target.parent_path(), true);
}

}  // namespace frugal
