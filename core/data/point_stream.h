// PointStream: the XMC trainers' stream of a packed points file (core/data/block_stream.h: a seeded
// block order, a shard of blocks per rank, read ahead, shuffled within windows), and what a run on a
// streamed set needs of the whole file without holding it: the validation share held back from
// seeded blocks, and the set's statistics and label counts from the file's header (the tallies its
// packer recorded), less that share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/dataset.h"
#include "core/propensity.h"
#include "core/sparse_batch.h"
#include "core/data/block_stream.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"

namespace frugal::data {

using PointStream = BlockStream<SparseBatch>;

// The validation share of a packed points file without reading it whole: data::split (`options`:
// its seed and stratification) at the rate that makes `count` points, over a seeded set of blocks
// holding at least 4 x `count` points (so the share comes from several places of the file). The
// points' indices in the file (ascending) and the points, in that order.
struct PointHeldBack {
  std::vector<uint64_t> indices;
  Dataset points;
};
PointHeldBack hold_back_point_blocks(PackedReader& reader, size_t count, const SplitOptions& options);

// A streamed training set as the run's set-up sees it: its size, statistics (compute_stats' figures:
// the tallies of the packed header; features_used and adjacent_same_label count the held-back
// points too) and the points of each label, the held-back points left out of all of them.
struct StreamedSet {
  uint64_t points = 0;
  DatasetStats stats;
  LabelCounts label_counts;
};
StreamedSet streamed_set(PackedReader& reader, const Dataset& held_back);

// Every point of a packed points file in file order, in batches of `batch`, the `held_back` points
// left out: a pass over a file larger than memory (the label centroids of the output's start).
// `next(batch)` fills the next batch; false after the last. `reader` must outlive it.
std::function<bool(SparseBatch&)> file_order_batches(PackedReader& reader, std::span<const uint64_t> held_back,
                                                     size_t batch);

}  // namespace frugal::data
