// BlockStream: one epoch of a packed data file (core/data/packed_file.h) read block by block while it
// trains, so a file larger than memory trains in memory that holds a few blocks: the click logs of
// DLRM (CtrStream, core/data/ctr_stream.h) and the sparse points of the XMC trainers (PointStream,
// core/data/point_stream.h). The epoch's blocks come in a seeded order; rank r of R takes every R-th
// of them (its shard: it reads only those), a background thread reads the next ones while the current
// train, and the samples of each window of `window_blocks` blocks are shuffled together (a batch at a
// window's end takes the rest of it and the start of the next). Each step, every rank gives its part of the global batch (the parts of
// slice_bounds(batch, R)); a rank whose shard is spent gives empty parts until every rank's is. Every
// rank computes every rank's counts from the header, so the ranks agree on the steps and the global
// batch sizes without a message.
//
// Not the in-memory order: a stream shuffles within windows, not over the whole file, so its runs
// differ from a run on the same data in memory (and from one on another rank count); the same seed
// and rank count give the same run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace frugal::data {

class PackedReader;

// Blocks a streamed epoch shuffles together (2 more are read ahead): 4 x 65,536 points, some tens of
// MB for sparse points, ~70 MB of click samples.
inline constexpr size_t kStreamWindowBlocks = 4;

struct BlockStreamOptions {
  size_t batch = 4096;  // global batch (over the ranks)
  uint64_t seed = 1;    // the epoch's: its block order and shuffles
  size_t rank = 0, ranks = 1;
  size_t window_blocks = kStreamWindowBlocks;  // blocks shuffled together
  // Samples (indices in the file, ascending) the stream leaves out: the validation share.
  std::span<const uint64_t> held_back{};
};

// `Pool`: CtrBatch (a clicks file) or SparseBatch (a points file).
template <class Pool>
class BlockStream {
 public:
  // What the trainers' step loop (train/epoch_run.h) asks of a loader.
  using Batch = Pool;
  static size_t points(const Pool& batch);

  // `reader` (a file of the Pool's kind) must outlive the stream.
  BlockStream(PackedReader& reader, const BlockStreamOptions& options);
  ~BlockStream();
  BlockStream(const BlockStream&) = delete;
  BlockStream& operator=(const BlockStream&) = delete;

  // This rank's part of the next global batch (possibly empty), and that batch's size; false when
  // the epoch is over.
  bool next(Pool& out, size_t* global_size = nullptr);
  // Passes over the next `steps` global batches (a run resumed within the epoch: what it trained
  // before), reading their blocks as next() would, so the steps after are the same.
  void skip(size_t steps);
  size_t step() const { return step_; }                    // global batches given or skipped so far
  size_t steps() const { return steps_; }                  // global batches in the epoch
  size_t global_samples() const { return global_samples_; }  // over every rank
  size_t samples() const { return samples_[rank_]; }       // this rank's shard
  // The blocks rank `rank` reads this epoch (those of the file, in its order).
  std::vector<uint64_t> blocks_of(size_t rank) const;

 private:
  struct Prefetch;
  size_t part_of(size_t rank, size_t step) const;  // the samples rank `rank` gives at step `step`
  void refill();

  PackedReader& reader_;
  BlockStreamOptions options_;
  size_t rank_ = 0;
  std::vector<uint64_t> order_;   // every block, in the epoch's order
  std::vector<size_t> samples_;   // per rank: its shard's samples (held-back ones left out)
  std::vector<size_t> part_size_;  // per rank: its part of a full global batch
  size_t steps_ = 0, global_samples_ = 0, step_ = 0, windows_ = 0;
  std::vector<Pool> window_;  // the current window's blocks
  std::vector<std::pair<uint32_t, uint32_t>> shuffled_;  // its samples (block, row) in the window's order
  size_t served_ = 0;
  std::unique_ptr<Prefetch> prefetch_;
};

// Block `block` of a packed file as a Pool, the `held` samples (file indices, ascending) left out.
template <class Pool>
void read_stream_block(PackedReader& reader, uint64_t block, std::span<const uint64_t> held, Pool& out);

}  // namespace frugal::data
