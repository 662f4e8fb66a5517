// BatchLoader: draws the batches of one epoch from a Dataset in a seeded shuffled order (or in
// file order) and builds the next batch on a background oneTBB task while the current one trains.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dataset.h"

namespace frugal::data {

struct BatchOptions {
  size_t batch = 128;  // points per global batch (over all shards)
  bool shuffle = true;
  uint64_t seed = 1;
  // Data-parallel replicas: shard d of D takes every D-th point of each global batch, starting at
  // its d-th point, so D replicas together see exactly the batches one process would.
  size_t shard = 0, num_shards = 1;
};

class BatchLoader {
 public:
  BatchLoader(const Dataset& data, const BatchOptions& options);
  ~BatchLoader();
  // Fills `out` with this shard's part of the next global batch; false when the epoch is over. The
  // part may be empty (a last global batch smaller than the shard count). `global_size`, when
  // given, receives the size of the whole global batch.
  bool next(SparseBatch& out, size_t* global_size = nullptr);
  // What the trainers' shared step loop (train/epoch_run.h) asks of a loader: its batch type and
  // the points of a batch.
  using Batch = SparseBatch;
  static size_t points(const SparseBatch& batch) { return batch.size(); }
  size_t num_batches() const;
  size_t num_points() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal::data
