// One file format for what frugal writes and reads back beside a checkpoint (label counts, label
// centroids, nearest points): an 8-byte magic, a format version, the body, and a CRC32C of all of it,
// so that a flipped bit, a truncation or another file in its place is refused by name.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace frugal::data {

// DIR/FILE written atomically (DIR is created if needed): the magic, the version, what `body`
// writes, and the CRC32C.
void save_checked_file(const std::string& dir, const std::string& file, const char (&magic)[8], uint32_t version,
                       const std::function<void(std::ostream&)>& body);
// Reads DIR/FILE back: refuses (frugal::Error naming the file, and `what` it should be) a missing
// or special file, a wrong checksum, magic or version; returns the bytes after the header.
std::string load_checked_file(const std::string& dir, const std::string& file, const char (&magic)[8],
                              uint32_t version, const std::string& what);
// The format version of DIR/FILE as its header says (0 when it is too short or has another magic):
// how a reader tells an older, unchecked format from a damaged file.
uint32_t checked_file_version(const std::string& dir, const std::string& file, const char (&magic)[8]);

}  // namespace frugal::data
