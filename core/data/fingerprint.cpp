#include "core/data/fingerprint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/data/packed_file.h"

namespace frugal::data {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
constexpr size_t kHeaderBytes = 200;

uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

uint64_t fnv1a_u64(uint64_t h, uint64_t v) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  return fnv1a(h, bytes, 8);
}

}  // namespace

std::string Fingerprint::to_string() const {
  return fmt::format("{} bytes, header '{}', sample {:016x}", size, header, hash);
}

std::vector<uint64_t> fingerprint_offsets(uint64_t size) {
  std::vector<uint64_t> out;
  if (size == 0) return out;
  const uint64_t whole_blocks = (size + kFingerprintBlockBytes - 1) / kFingerprintBlockBytes;
  if (whole_blocks <= kFingerprintBlocks) {  // small: every block
    for (uint64_t b = 0; b < whole_blocks; ++b) out.push_back(b * kFingerprintBlockBytes);
    return out;
  }
  // Evenly spread from the first block (offset 0) to the last (ending at the end of the file).
  const uint64_t last = size - kFingerprintBlockBytes;
  for (uint64_t i = 0; i < kFingerprintBlocks; ++i) {
    // i * last can overflow only for files beyond 2^58 bytes.
    out.push_back(i * last / (kFingerprintBlocks - 1));
  }
  return out;
}

Fingerprint fingerprint(const std::string& path) {
  if (is_packed_file(path)) {
    const PackedReader packed(path);
    if (packed.header().source_fingerprint) return *packed.header().source_fingerprint;
  }
  return file_fingerprint(path);
}

Fingerprint file_fingerprint(const std::string& path) {
  std::ifstream in = open_regular_file(path, "a data file");
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  if (end < 0) throw Error(fmt::format("{}: cannot read its size", path));
  Fingerprint f;
  f.size = static_cast<uint64_t>(end);
  uint64_t h = fnv1a_u64(kFnvOffset, f.size);
  std::vector<unsigned char> block(kFingerprintBlockBytes);
  for (const uint64_t offset : fingerprint_offsets(f.size)) {
    const uint64_t n = std::min<uint64_t>(kFingerprintBlockBytes, f.size - offset);
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(block.data()), static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in.gcount()) != n)
      throw Error(fmt::format("{}: cannot read {} bytes at offset {}", path, n, offset));
    h = fnv1a(fnv1a_u64(h, offset), block.data(), n);
    if (offset == 0) {  // the header line is in the first block (or cut at kHeaderBytes)
      const size_t limit = std::min<size_t>(n, kHeaderBytes);
      size_t len = 0;
      while (len < limit && block[len] != '\n') ++len;
      while (len > 0 && block[len - 1] == '\r') --len;
      // Printable ASCII as is, other bytes as \xNN: a gzip or binary file's "header" goes into JSON
      // run configs and messages, which need text.
      for (size_t i = 0; i < len; ++i) {
        const auto c = static_cast<unsigned char>(block[i]);
        f.header += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
      }
    }
  }
  f.hash = h;
  return f;
}

}  // namespace frugal::data
