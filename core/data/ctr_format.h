// The Criteo click-log format (Criteo's Kaggle display-advertising set, DLRM's benchmark) and the
// batch layout frugal keeps it in. One sample a line, 40 tab-separated fields:
//   label \t I1 .. I13 \t C1 .. C26
// label 0 or 1; I1..I13 integer counts (may be negative; empty = missing); C1..C26 categorical ids
// as hex strings (Criteo's are 8 hex digits, i.e. 32-bit hashes; empty = missing). A batch holds
// the values a model consumes: dense features transformed as DLRM does, ids as integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::data {

inline constexpr size_t kCtrDense = 13;                     // I1..I13
inline constexpr size_t kCtrCats = 26;                      // C1..C26
inline constexpr size_t kCtrColumns = 1 + kCtrDense + kCtrCats;  // 40
// The id of a missing categorical value: one past every 32-bit Criteo id, so that it can have
// its own embedding row. A file whose id is exactly this value is refused rather than confused.
inline constexpr uint64_t kMissingCategory = uint64_t{1} << 32;

// The name of a 1-based column: 1 "label", 2..14 "I1".."I13", 15..40 "C1".."C26".
std::string ctr_column_name(size_t column);

// log(1 + max(x, 0)): DLRM's transform of the heavy-tailed counts (negative values, which Criteo
// has in I2, count as 0). A missing value is 0 too.
float ctr_dense_transform(int64_t x);

struct CtrBatch {
  size_t size = 0;
  std::vector<float> labels;  // size: 0 or 1
  std::vector<float> dense;   // size x kCtrDense, row-major, ctr_dense_transform of I1..I13
  std::vector<uint64_t> cats; // size x kCtrCats, row-major, C1..C26 (kMissingCategory when empty)

  std::span<const float> dense_of(size_t i) const { return {dense.data() + i * kCtrDense, kCtrDense}; }
  std::span<const uint64_t> cats_of(size_t i) const { return {cats.data() + i * kCtrCats, kCtrCats}; }
  void clear();
  void reserve(size_t samples);
  // Appends sample i of `from` (e.g. to gather a shuffled minibatch from a CtrDataset).
  void append(const CtrBatch& from, size_t i);
  // Throws frugal::Error unless the vectors have the sizes `size` says.
  void validate() const;
};

// A whole file in memory (load_ctr, core/data/ctr_reader.h): the same layout, every sample.
using CtrDataset = CtrBatch;

// One raw sample as the text holds it, before the dense transform; what the generator writes.
struct CtrRecord {
  int label = 0;
  int64_t ints[kCtrDense] = {};
  bool int_missing[kCtrDense] = {};
  uint64_t cats[kCtrCats] = {};  // kMissingCategory: empty field
};

// Parses one line (without its '\n'; a trailing '\r' is allowed). Errors throw frugal::Error
// "{name}:{line_no}: ..." naming the 1-based column and its name, e.g. "column 4 (I3)".
CtrRecord parse_ctr_line(std::string_view text, const std::string& name, size_t line_no);
// Appends `r` to `out` as a batch holds it.
void append_record(const CtrRecord& r, CtrBatch& out);
// Appends `r` as one line with its '\n' (ids as 8 lower-case hex digits, more when larger).
void format_ctr_line(const CtrRecord& r, std::string& out);

}  // namespace frugal::data
