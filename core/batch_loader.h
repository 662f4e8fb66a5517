// BatchLoader: draws the batches of one epoch from a Dataset in a seeded shuffled order (or in
// file order) and builds the next batch on a background oneTBB task while the current one trains.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dataset.h"

namespace frugal::data {

struct BatchOptions {
  size_t batch = 128;
  bool shuffle = true;
  uint64_t seed = 1;
  // Optional shard: this loader sees points i with i % num_shards == shard (after shuffling).
  size_t shard = 0, num_shards = 1;
};

class BatchLoader {
 public:
  BatchLoader(const Dataset& data, const BatchOptions& options);
  ~BatchLoader();
  // Fills `out` with the next batch; false when the epoch is over.
  bool next(SparseBatch& out);
  size_t num_batches() const;
  size_t num_points() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal::data
