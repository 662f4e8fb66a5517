// Packed data files (`frugal data pack IN OUT`): a data set converted once into a binary, checksummed
// layout that a run reads without parsing text. Every reader of data files takes them (XmcFile::open,
// XmcReader, CtrReader, load_ctr: the kind is told by the file's first bytes, not its name), so a packed
// file goes wherever its text form went, and trains bit for bit as the text does.
//
// Layout (little-endian, as the x86-64 and ARM64 hosts frugal runs on):
//   bytes 0-31   the prefix: magic "FRUGALPK", format version (u32), 4 reserved bytes, the offset of the
//                header (u64), its length (u64);
//   bytes 64-    the sections, each 64-byte aligned. Points (an XMC or IDX data set): feature offsets
//                (u64, N+1), feature ids (u32), feature values (f32), label offsets (u64, N+1), label ids
//                (u32): the CSR arrays of core/sparse_batch.h. Clicks (Criteo logs): one 320-byte row
//                a sample (flags: bit 0 the click, bits 1-13 I1..I13 missing; I1..I13 as int64; C1..C26
//                as uint64), so the raw values survive (`frugal data stats` reads them);
//   the header   JSON (counts, the sections' offsets and sizes, the source file and its content hash,
//                one CRC32C a block), then the CRC32C of the prefix and the JSON (u32), then the end.
// A block is kPackedBlockPoints consecutive points: the unit of checksums and reads, so that a damaged
// byte is named by its block, and a reader of a range of points reads and checks only its blocks.
// Packing streams: its memory holds one block, whatever the file's size.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dataset.h"
#include "core/data/ctr_format.h"
#include "core/data/fingerprint.h"

namespace frugal::data {

enum class PackedKind : uint32_t { points = 1, clicks = 2 };
std::string_view to_string(PackedKind kind);  // "points" (XMC or IDX data), "clicks" (Criteo logs)

inline constexpr char kPackedMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'P', 'K'};
inline constexpr uint32_t kPackedVersion = 1;
inline constexpr uint64_t kPackedPrefixBytes = 32;   // magic, version, reserved, header offset and length
inline constexpr uint64_t kPackedFirstSection = 64;  // where the first section starts
inline constexpr uint64_t kPackedAlign = 64;         // every section starts at a multiple
inline constexpr uint64_t kPackedBlockPoints = 65536;
inline constexpr uint64_t kPackedClickBytes = 320;  // one click row

struct PackedSection {
  uint64_t offset = 0, bytes = 0;
};

struct PackedHeader {
  PackedKind kind = PackedKind::points;
  uint64_t points = 0;
  uint32_t features = 0, labels = 0;        // points: the data set's declared dimensions
  uint64_t feature_nnz = 0, label_nnz = 0;  // points: entries over every point
  uint64_t block_points = kPackedBlockPoints;
  std::vector<uint32_t> block_crcs;  // one CRC32C a block, over its bytes in every section in order
  std::vector<PackedSection> sections;
  std::string source;       // the file it was packed from, as given to `frugal data pack`
  std::string source_hash;  // that file's whole-content hash (Dataset::content_hash), or empty
  // That file's fingerprint (core/data/fingerprint.h), which data::fingerprint returns for the packed
  // file; none for a data set packed from memory.
  std::optional<Fingerprint> source_fingerprint;

  // Points files: what data::compute_stats tallies over the points, recorded while packing, so that
  // the defaults of a set that is streamed (never held whole) are read from here. With them, a
  // sixth section holds the points of each label that occurs (label id, points: u32 pairs in id
  // order), checked by label_counts_crc. Absent in a file packed before they were recorded.
  struct Tallies {
    uint64_t points_without_labels = 0, points_without_features = 0;
    uint64_t features_used = 0, labels_used = 0;
    uint64_t adjacent_same_label = 0;  // neighbouring points whose first labels are equal
  };
  std::optional<Tallies> tallies;
  uint32_t label_counts_crc = 0;

  uint64_t blocks() const { return block_crcs.size(); }
  uint64_t block_first(uint64_t block) const { return block * block_points; }
  uint64_t block_size(uint64_t block) const;
  // What the ranks of a run compare to know they read the same data: the source's hash where the
  // packer knew it (so a packed file and its text agree), else a hash of the block checksums.
  std::string content_hash() const;
  // The blocks as they are cut and checksummed: what ranks that each read their own blocks must share
  // (two packings of the same text with other block sizes are the same data, not the same blocks).
  std::string block_list() const;
};

// The size of a range of blocks: points, and their feature and label entries (points files).
struct PackedRange {
  uint64_t points = 0, feature_nnz = 0, label_nnz = 0;
};

// True when `path` is a regular file that starts with the packed magic; false for any other file or
// none (the caller's own reader then names what is wrong).
bool is_packed_file(const std::string& path);

// Reads a packed file block by block, each checked against its checksum before it is used. Refused
// (frugal::Error naming the file, and the block where one is at fault): another magic or version, a
// truncated file, a damaged header, a block whose bytes do not match its checksum, ids outside the
// declared dimensions or non-finite values (a forged file with matching checksums).
class PackedReader {
 public:
  explicit PackedReader(const std::string& path);
  ~PackedReader();
  PackedReader(const PackedReader&) = delete;
  PackedReader& operator=(const PackedReader&) = delete;

  const PackedHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Appends block `block`'s points to `out` (a points file; `limits` as the XMC reader's: a model's
  // input width, named in the error).
  void read_points(uint64_t block, SparseBatch& out, uint32_t feature_limit = UINT32_MAX,
                   const std::string& limit_what = {});
  // What blocks [first_block, end_block) hold (for a reader sizing its arrays once).
  PackedRange range(uint64_t first_block, uint64_t end_block);
  // The points of each label that occurs (ascending label ids), from the sixth section (checked:
  // its checksum, ids below the header's labels, ascending, counts within the points); refused naming
  // the pack command when the file has none (packed before they were recorded).
  std::vector<std::pair<uint32_t, uint32_t>> label_points();
  // Appends block `block`'s samples to `out` (a clicks file), as the text's lines would parse.
  void read_clicks(uint64_t block, std::vector<CtrRecord>& out);
  // Where read_points_into puts a block: its point's end offsets go to feature_offsets[1..n] and
  // label_offsets[1..n] (entry 0 is the previous point's end, the caller's), counted from
  // feature_base / label_base; its entries to ids/values/labels, which hold `features` and
  // `label_count` of them.
  struct PointArrays {
    uint64_t* feature_offsets = nullptr;
    uint32_t* ids = nullptr;
    float* values = nullptr;
    uint64_t* label_offsets = nullptr;
    uint32_t* labels = nullptr;
    uint64_t feature_base = 0, label_base = 0;
    uint64_t features = 0, label_count = 0;
  };
  // Reads and checks block `block` into `to` (thread-safe: blocks may be read in parallel).
  void read_points_into(uint64_t block, const PointArrays& to, uint32_t feature_limit = UINT32_MAX,
                        const std::string& limit_what = {});
  // Bytes read from the file so far (header included): what a shard's reader measures.
  uint64_t bytes_read() const { return bytes_read_.load(); }

 private:
  void read_at(uint64_t offset, void* to, uint64_t bytes);
  [[noreturn]] void damaged(uint64_t block, const std::string& why) const;

  std::string path_;
  int fd_ = -1;
  PackedHeader header_;
  std::atomic<uint64_t> bytes_read_{0};
};

// The points of blocks [first_block, first_block + blocks) of a packed points file, as a Dataset
// (content_hash: the header's). The whole file by default.
Dataset load_packed_points(const std::string& path, uint64_t first_block = 0, uint64_t blocks = UINT64_MAX);

// `frugal data pack`: writes the packed form of `in` to `out` (atomically: a failure leaves no
// `out`). An XMC text file and a Criteo log (plain or gzip) are streamed; `data` packs a data set
// held in memory (an IDX set). Returns the header written. `block_points`: points a block (tests
// make small blocks; the default suits every reader).
PackedHeader pack_xmc_file(const std::string& in, const std::string& out, uint64_t block_points = kPackedBlockPoints);
PackedHeader pack_ctr_file(const std::string& in, const std::string& out, uint64_t block_points = kPackedBlockPoints);
PackedHeader pack_dataset(const Dataset& data, const std::string& out, uint64_t block_points = kPackedBlockPoints);

}  // namespace frugal::data
