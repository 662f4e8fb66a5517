// Streaming reader of Criteo-format click logs (core/data/ctr_format.h), plain or gzip: samples
// come in batches of any size, so a file of any length (the Kaggle set has 45.8M lines) is read in
// memory that does not grow with it. Every line is validated; an error names file:line and the
// column. load_ctr reads a whole (small) file into memory through it.
#pragma once

#include <cstddef>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "core/data/ctr_format.h"

namespace frugal::data {

class PackedReader;

// Reads a packed file too (core/data/packed_file.h; told by its first bytes): the same samples, each
// block checked; line() then counts samples.
class CtrReader {
 public:
  explicit CtrReader(const std::string& path);           // a file, gzip-compressed or not
  CtrReader(std::istream& in, const std::string& name);  // a stream (not owned); `name` for messages
  ~CtrReader();
  CtrReader(CtrReader&&) noexcept;
  CtrReader& operator=(CtrReader&&) noexcept;

  // Longer lines are refused, as in the XMC reader: a Criteo line holds a few hundred bytes.
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;

  // Replaces `out`'s contents with up to `max_samples` further samples and returns how many;
  // 0 at the end of the file. An empty line is an error (it has 1 field, not 40), except that a
  // final newline ends the file.
  size_t next(size_t max_samples, CtrBatch& out);
  // The next sample as the line holds it (raw integers, missing flags); false at the end. For
  // tools that need what the transform hides (`frugal data stats`).
  bool next_record(CtrRecord& out);
  // Back to the first line (the next epoch). A stream reader needs a seekable stream.
  void rewind();
  size_t line() const { return line_no_; }  // the last line read (0 before the first)
  size_t samples_read() const { return samples_read_; }  // since the last rewind
  const std::string& name() const { return name_; }

 private:
  std::unique_ptr<std::istream> owned_;
  std::istream* in_ = nullptr;
  std::string name_, path_, text_;
  CtrRecord record_;
  size_t line_no_ = 0, samples_read_ = 0;
  bool finished_ = false;
  // A packed file: its reader, the next block and the samples of the current one not yet served.
  std::unique_ptr<PackedReader> packed_;
  uint64_t packed_block_ = 0;
  std::vector<CtrRecord> packed_rows_;
  size_t packed_served_ = 0;
  bool next_packed(CtrRecord& out);
};

// Every sample of the file (plain or gzip) in memory.
CtrDataset load_ctr(const std::string& path);

}  // namespace frugal::data
