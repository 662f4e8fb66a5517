// Writing a file so that readers see either the old or the new content, never a mix: write a
// temporary file next to it, fsync it, rename it over the target, fsync the directory. What
// checkpoints and their side files use (internal header, not installed). On any failure before the
// rename (open, write, fsync, rename itself) the temporary file is removed and the error rethrown.
#pragma once

#include <filesystem>
#include <string>

namespace frugal {

void write_atomically(const std::filesystem::path& target, const std::string& bytes);

}  // namespace frugal
