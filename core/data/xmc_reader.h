// Streaming reader of the Extreme Classification Repository text format (core/data/xmc_file.h lists
// what it accepts): the header is read on opening, then points come in chunks of any size, so a
// file of any length is processed in bounded memory (`frugal predict`, `frugal evaluate`).
// XmcFile::open reads whole files through it. Every line is validated; an error names file:line.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "core/sparse_batch.h"

namespace frugal::data {

class PackedReader;

// Reads a packed file too (core/data/packed_file.h; told by its first bytes): the same points, each
// block checked; errors name the point instead of the line.
class XmcReader {
 public:
  explicit XmcReader(const std::string& path);        // opens the file and reads its header
  XmcReader(std::istream& in, const std::string& name);  // from a stream (not owned); `name` for messages
  ~XmcReader();
  XmcReader(XmcReader&&) noexcept;
  XmcReader& operator=(XmcReader&&) noexcept;

  // Longer lines are refused ("file:line: line longer than ... bytes"): no XMC data set comes near.
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;

  uint64_t num_points() const { return num_points_; }  // N of the header
  uint32_t num_features() const { return num_features_; }
  uint32_t num_labels() const { return num_labels_; }
  const std::string& name() const { return name_; }
  size_t points_read() const { return points_read_; }

  // Also refuse feature ids >= `limit` (e.g. a model's input width); the error reads
  // "file:line: feature id X >= {what} = {limit}".
  void limit_features(uint32_t limit, const std::string& what);
  // Appends up to `max_points` further points to `out` (which it does not clear) and returns how
  // many. 0 means the file is done: it held exactly N points (else an error names the line).
  size_t read(SparseBatch& out, size_t max_points);

 private:
  void read_header();
  bool parse_point(SparseBatch& out);  // false: a tolerated blank line, no point

  std::unique_ptr<std::istream> owned_;
  std::istream* in_ = nullptr;
  std::string name_, line_;
  size_t line_no_ = 1;
  uint64_t num_points_ = 0;
  uint64_t size_limit_ = UINT64_MAX;  // the file's size in bytes, when reading a file
  uint32_t num_features_ = 0, num_labels_ = 0;
  uint32_t feature_limit_ = UINT32_MAX;
  std::string limit_what_;
  size_t points_read_ = 0;
  bool finished_ = false;
  std::vector<uint32_t> ids_, labels_;
  std::vector<float> values_;
  // A packed file: its reader, the next block to read and the points of the current one not yet served.
  std::unique_ptr<PackedReader> packed_;
  uint64_t packed_block_ = 0;
  SparseBatch packed_points_;
  size_t packed_served_ = 0;
  size_t read_packed(SparseBatch& out, size_t max_points);
};

}  // namespace frugal::data
