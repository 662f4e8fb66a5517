// The slice files of checkpoints (train/checkpoint.h), as read back: per parameter its slice
// (name, sliced axis, offset, the whole parameter's shape), value, optimizer moments and per-row step
// counts, then the step, the epoch and each layer's own state, cereal binary after an 8-byte magic
// and the format version. Internal: checkpoint.cpp writes and restores them; the fuzz target
// tests/fuzz/fuzz_checkpoint.cpp feeds the decoder bytes.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace frugal::train {

inline constexpr char kSliceFileMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'K'};

// One parameter slice as stored in a slice file.
struct StoredParam {
  std::string name;
  int axis = -1;
  uint64_t offset = 0, full_rows = 0, full_cols = 0;
  Tensor value, m, v;
  std::vector<uint32_t> row_steps;
};

struct SliceFile {
  std::vector<StoredParam> params;
  uint64_t step = 0, epoch = 0;
  std::vector<std::string> layer_states;
};

// Decodes a slice file from `in` (seekable: counts are checked against the bytes left before
// anything is allocated); `name` for messages. `full`: also the optimizer moments and the layer
// states (resume); else the weights only (inference; m and v stay empty). Throws frugal::Error
// naming `name` for a file that is not a slice file of this version, is truncated, or holds a slice
// that does not fit its own parameter (the shapes that reslicing and restoring index by).
SliceFile decode_slice(std::istream& in, const std::string& name, bool full);

// Throws frugal::Error naming `path` unless a file's CRC32C `computed` is the `stored` one.
void check_checksum(const std::string& path, uint32_t stored, uint32_t computed);

}  // namespace frugal::train
