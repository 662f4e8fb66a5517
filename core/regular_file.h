// Files frugal reads are regular files. A directory, device, FIFO or socket where a data file,
// checkpoint or key is expected (a symlink to /dev/zero, manifest.json made a directory, a FIFO given
// as --train) is refused by type before it is opened, so that no reader spins on an endless device or
// blocks on a FIFO, and the message names the path in the user's terms rather than the C++ library's.
// Every file frugal opens for reading is opened here: open_regular_file (a stream),
// fopen_regular_file (C stdio), open_regular_fd (a descriptor, for zlib's gzdopen), or, for readers
// that open the file themselves (zlib's gzopen), require_regular_file first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace frugal {

// Throws frugal::Error naming `path` (and `what` it should be, e.g. "an XMC data file") unless it is,
// after following symlinks, a regular file.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// `path` opened for reading once require_regular_file has passed; throws frugal::Error naming it (and
// the system's reason) when it cannot be opened.
std::ifstream open_regular_file(const std::filesystem::path& path, const std::string& what,
                                std::ios::openmode mode = std::ios::binary);

// The same as a C stream ("rb"): the caller closes it. Checked on the open descriptor too (fstat),
// so a file swapped for a FIFO between the check and the open is refused, not waited on.
std::FILE* fopen_regular_file(const std::filesystem::path& path, const std::string& what);

// The same as a descriptor (O_RDONLY | O_CLOEXEC): the caller closes it (gzdopen takes it over).
int open_regular_fd(const std::filesystem::path& path, const std::string& what);

// The whole of a regular file (require_regular_file first); `max_bytes` bounds what is read into
// memory (a larger file is an error naming it).
std::string read_regular_file(const std::filesystem::path& path, const std::string& what,
                              uintmax_t max_bytes = uintmax_t{1} << 40);

}  // namespace frugal
