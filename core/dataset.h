// Dataset: a whole data set held in memory as one CSR batch plus its dimensions. The readers of
// core/data/ produce it (XMC text files: xmc_file.h; IDX image files: idx_file.h; the GCIDE
// builder and the synthetic generator too); the batch loader draws batches from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/sparse_batch.h"

namespace frugal::data {

struct Dataset {
  SparseBatch points;
  uint32_t num_features = 0;
  uint32_t num_labels = 0;
  std::string source;  // file name, for messages
  // The whole file's size and CRC32C, computed while it was read (no extra pass): what the ranks of
  // a run compare to be sure they read the same data. Empty where the reader does not compute it.
  std::string content_hash;

  size_t size() const { return points.size(); }
  // Appends the points named by `indices`, in that order, to `out`.
  void gather(std::span<const uint32_t> indices, SparseBatch& out) const;
  double average_nonzeros() const;
  double average_labels() const;
};

}  // namespace frugal::data
