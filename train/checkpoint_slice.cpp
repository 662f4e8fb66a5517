#include "train/checkpoint_slice.h"

#include <algorithm>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/bounded_read.h"
#include "core/check.h"
#include "core/optim/state_layout.h"
#include "core/tensor_io.h"
#include "train/checkpoint.h"

namespace frugal::train {
namespace {

// Reads past `bytes` bytes of the archive (moments that weights-only loading does not keep)
// without holding them in memory.
void skip_bytes(cereal::BinaryInputArchive& ar, uint64_t bytes) {
  char scratch[1 << 16];
  for (uint64_t left = bytes; left > 0;) {
    const uint64_t n = std::min<uint64_t>(left, sizeof scratch);
    ar(cereal::binary_data(scratch, n));
    left -= n;
  }
}

// What restoring relies on when it copies a stored slice into the model's: the slice lies inside
// its parameter, the moments (when there) have the value's shape (or, row-wise, one column) and there
// is a step count per row.
void check_param(const StoredParam& p, const std::string& name) {
  const auto fail = [&](const std::string& what) {
    throw Error(fmt::format("{}: parameter {}: {}: the file is corrupt", name, p.name, what));
  };
  const Tensor& w = p.value;
  if (p.axis < -1 || p.axis > 1) fail(fmt::format("sliced axis {} (not -1, 0 or 1)", p.axis));
  if (p.axis == 0 && (w.cols() != p.full_cols || p.offset > p.full_rows || w.rows() > p.full_rows - p.offset))
    fail(fmt::format("rows [{}, +{}) x {} columns are not a row slice of {}x{}", p.offset, w.rows(), w.cols(),
                     p.full_rows, p.full_cols));
  if (p.axis == 1 && (w.rows() != p.full_rows || p.offset > p.full_cols || w.cols() > p.full_cols - p.offset))
    fail(fmt::format("{} rows x columns [{}, +{}) are not a column slice of {}x{}", w.rows(), p.offset, w.cols(),
                     p.full_rows, p.full_cols));
  for (const Tensor* t : {&p.m, &p.v})
    if (optim::state_layout(*t, w) == optim::StateLayout::invalid)
      fail(fmt::format("optimizer state {}x{} for a {}x{} value", t->rows(), t->cols(), w.rows(), w.cols()));
  if (p.row_steps.size() != w.rows()) fail(fmt::format("{} row step counts for {} rows", p.row_steps.size(), w.rows()));
}

}  // namespace

SliceFile decode_slice(std::istream& in, const std::string& name, bool full) {
  SliceFile f;
  try {
    cereal::BinaryInputArchive ar(in);
    check_file_header(ar, kSliceFileMagic, kCheckpointVersion, name, "a frugal checkpoint");
    uint64_t n = 0;
    ar(n);
    FRUGAL_CHECK(n < 4096, fmt::format("{}: implausible parameter count {}", name, n));
    f.params.resize(n);
    for (StoredParam& p : f.params) {
      int32_t axis = 0;
      read_string(ar, in, p.name, name + ": parameter name");
      ar(axis, p.offset, p.full_rows, p.full_cols);
      p.axis = axis;
      // Shapes are read from the file itself: this is what reslicing needs.
      for (Tensor* t : {&p.value, &p.m, &p.v}) {
        uint64_t r = 0, c = 0;
        ar(r, c);
        // Checked before the product, which could wrap, and before allocating: a tensor's floats
        // must be in the file.
        const uint64_t left = bytes_left(in) / sizeof(float);
        if (c != 0 && r > left / c)
          throw Error(fmt::format("{}: parameter {}: a {}x{} tensor does not fit in the {} bytes left: the file "
                                  "is truncated or corrupt",
                                  name, p.name, r, c, bytes_left(in)));
        if (!full && t != &p.value) {
          skip_bytes(ar, r * c * sizeof(float));
          continue;
        }
        t->resize(r, c);
        if (!t->empty()) ar(cereal::binary_data(t->data(), t->size() * sizeof(float)));
      }
      read_vector(ar, in, p.row_steps, name + ": parameter " + p.name + " row steps");
      check_param(p, name);
    }
    ar(f.step, f.epoch);
    if (full) {
      f.layer_states.resize(read_count(ar, in, 8, name + ": layer states"));  // each at least its size tag
      for (std::string& s : f.layer_states) read_string(ar, in, s, name + ": layer state");
    }
  } catch (const cereal::Exception&) {
    throw Error(fmt::format("{}: truncated or corrupt checkpoint", name));
  }
  return f;
}

void check_checksum(const std::string& path, uint32_t stored, uint32_t computed) {
  if (computed != stored)
    throw Error(fmt::format("{}: checksum mismatch (stored {:08x}, computed {:08x}): the file is truncated or corrupt",
                            path, stored, computed));
}

}  // namespace frugal::train
