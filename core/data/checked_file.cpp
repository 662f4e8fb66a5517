#include "core/data/checked_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/crc32c.h"
#include "core/regular_file.h"

namespace frugal::data {
namespace fs = std::filesystem;
namespace {

uint32_t checksum(const std::string& bytes) {
  return crc32c(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

}  // namespace

void save_checked_file(const std::string& dir, const std::string& file, const char (&magic)[8], uint32_t version,
                       const std::function<void(std::ostream&)>& body) {
  std::ostringstream buf(std::ios::binary);
  buf.write(magic, 8);
  buf.write(reinterpret_cast<const char*>(&version), sizeof version);
  body(buf);
  std::string bytes = buf.str();
  const uint32_t crc = checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  fs::create_directories(dir);
  write_atomically(fs::path(dir) / file, bytes);
}

std::string load_checked_file(const std::string& dir, const std::string& file, const char (&magic)[8],
                              uint32_t version, const std::string& what) {
  const fs::path path = fs::path(dir) / file;
  const std::string name = path.string();
  std::error_code ec;
  FRUGAL_CHECK(fs::is_regular_file(path, ec),
               fmt::format("{}: {}", name, fs::exists(path, ec) ? "not a regular file" : "no such file"));
  std::ifstream in = open_regular_file(path, what);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kHeader = 8 + sizeof(uint32_t);
  FRUGAL_CHECK(bytes.size() >= kHeader + sizeof(uint32_t), fmt::format("{}: truncated ({} bytes)", name, bytes.size()));
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
  bytes.resize(bytes.size() - sizeof stored);
  FRUGAL_CHECK(checksum(bytes) == stored,
               fmt::format("{}: checksum mismatch (the file is damaged or truncated)", name));
  FRUGAL_CHECK(std::memcmp(bytes.data(), magic, 8) == 0, fmt::format("{}: not {}", name, what));
  uint32_t got = 0;
  std::memcpy(&got, bytes.data() + 8, sizeof got);
  FRUGAL_CHECK(got == version, fmt::format("{}: {} of format version {}, this frugal reads {}", name, what, got, version));
  return bytes.substr(kHeader);
}

uint32_t checked_file_version(const std::string& dir, const std::string& file, const char (&magic)[8]) {
  // Not a regular file (a FIFO put in its place would block the open): no version to read.
  std::ifstream in;
  try {
    in = open_regular_file(fs::path(dir) / file, "a checked file");
  } catch (const Error&) {
    return 0;
  }
  char head[8 + sizeof(uint32_t)] = {};
  if (!in.read(head, sizeof head) || std::memcmp(head, magic, 8) != 0) return 0;
  uint32_t version = 0;
  std::memcpy(&version, head + 8, sizeof version);
  return version;
}

}  // namespace frugal::data
