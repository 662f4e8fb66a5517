// CtrView: a batch of click-through samples as the DLRM layers read them, whatever holds the data
// (a Criteo-format reader's batch, a whole data set in memory, a test's arrays): per sample a 0/1
// label, num_dense dense features and num_fields categorical ids (raw 64-bit values; kMissingId
// for a missing one), row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace frugal::layers {

// A categorical field with no value (Criteo: an empty column). Raw ids are 32-bit hex values, so
// this is outside every real id.
inline constexpr uint64_t kMissingId = uint64_t{1} << 32;

struct CtrView {
  size_t size = 0, num_dense = 0, num_fields = 0;
  std::span<const float> labels;    // size
  std::span<const float> dense;     // size x num_dense
  std::span<const uint64_t> cats;   // size x num_fields
  // Samples [begin, end) of this view.
  CtrView slice(size_t begin, size_t end) const {
    return {end - begin, num_dense, num_fields, labels.subspan(begin, end - begin),
            dense.subspan(begin * num_dense, (end - begin) * num_dense),
            cats.subspan(begin * num_fields, (end - begin) * num_fields)};
  }
  // Throws frugal::Error naming what does not match (sizes, labels other than 0/1).
  void validate() const;
};

}  // namespace frugal::layers
