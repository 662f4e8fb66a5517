// A cheap fingerprint of a data file, so that the ranks of a run can check that they read the same
// data (`frugal train` and `frugal predict/evaluate` put it in the run configuration compared at
// rendezvous). It holds the file's size, its header line and a 64-bit FNV-1a hash of up to
// kFingerprintBlocks sampled blocks of kFingerprintBlockBytes at deterministic offsets (the first
// and the last block always; a file no larger than all the blocks together is hashed whole), so a
// 10 GB file costs 64 reads of 4 KB. Two files with the same fingerprint are very likely, not
// certainly, the same: an edit that falls between the sampled blocks and keeps the size goes unseen.
// A shuffled copy of a file differs in its blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace frugal::data {

inline constexpr uint64_t kFingerprintBlockBytes = 4096;
inline constexpr uint64_t kFingerprintBlocks = 64;

struct Fingerprint {
  uint64_t size = 0;   // bytes
  std::string header;  // the first line, without its line ending (at most 200 bytes kept)
  uint64_t hash = 0;   // FNV-1a over the size and the sampled blocks

  // e.g. "12345 bytes, header '3000 3000 600', sample 0123456789abcdef".
  std::string to_string() const;
  bool operator==(const Fingerprint&) const = default;
};

// The offsets of the blocks fingerprint() hashes in a file of `size` bytes (ascending; each block
// holds kFingerprintBlockBytes, or the rest of the file).
std::vector<uint64_t> fingerprint_offsets(uint64_t size);

// The fingerprint of the data at `path`: for a packed file (core/data/packed_file.h), the fingerprint
// of the text it was packed from, recorded by `frugal data pack` (so ranks or runs reading either form
// of the same data agree); for any other file, file_fingerprint. Throws frugal::Error naming the path
// when the file cannot be read (or is a damaged packed file).
Fingerprint fingerprint(const std::string& path);
// The fingerprint of the file's own bytes.
Fingerprint file_fingerprint(const std::string& path);

}  // namespace frugal::data
