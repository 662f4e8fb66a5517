// The distinct ids of a list, ascending, for row ids below a known bound: what a sparse input
// layer's gradient lists (the batch's features). A device backend computes the same list on the
// device; the layer lists it on the host from its own copy of the batch so that no row list has
// to come down (core/backend.h, sparse_input_backward).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace frugal {

class DistinctRows {
 public:
  // Ids must be below num_rows (the caller checked them: the layer's features against its rows).
  explicit DistinctRows(size_t num_rows = 0) : words_((num_rows + 63) / 64, 0) {}
  size_t num_rows() const { return words_.size() * 64; }
  // out = the distinct ids, ascending. A bit per row, set for each id and read back in order:
  // O(ids + num_rows / 64), no sort; the bits are cleared again for the next call.
  void list(std::span<const uint32_t> ids, std::vector<uint32_t>& out);

 private:
  std::vector<uint64_t> words_;
};

}  // namespace frugal
