// Files frugal reads are regular files. A directory, device, FIFO or socket where a data file,
// checkpoint or key is expected (a symlink to /dev/zero, manifest.json made a directory) is refused
// by type before it is opened, so that no reader spins on an endless device or blocks on a FIFO, and
// the message names the path in the user's terms rather than the C++ library's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace frugal {

// Throws frugal::Error naming `path` (and `what` it should be, e.g. "an XMC data file") unless it is,
// after following symlinks, a regular file.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// The whole of a regular file (require_regular_file first); `max_bytes` bounds what is read into
// memory (a larger file is an error naming it).
std::string read_regular_file(const std::filesystem::path& path, const std::string& what,
                              uintmax_t max_bytes = uintmax_t{1} << 40);

}  // namespace frugal
