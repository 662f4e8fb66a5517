#include "core/data/block_stream.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/check.h"
#include "core/placement.h"
#include "core/rng.h"
#include "core/sparse_batch.h"
#include "core/data/ctr_format.h"
#include "core/data/dataset_split.h"
#include "core/data/packed_file.h"

namespace frugal::data {
namespace {

// Blocks the reader thread keeps ready beyond the window: enough that the next window's first block
// is read while this one trains.
constexpr size_t kReadAhead = 2;

// How many of `held` (ascending) fall in [first, first + n).
size_t held_in(std::span<const uint64_t> held, uint64_t first, uint64_t n) {
  const auto lo = std::lower_bound(held.begin(), held.end(), first);
  const auto hi = std::lower_bound(lo, held.end(), first + n);
  return static_cast<size_t>(hi - lo);
}

// What the stream does with each kind of pool: its size, one sample appended, and the kind of file.
size_t pool_size(const CtrBatch& p) { return p.size; }
size_t pool_size(const SparseBatch& p) { return p.size(); }
void append_one(CtrBatch& to, const CtrBatch& from, size_t i) { to.append(from, i); }
void append_one(SparseBatch& to, const SparseBatch& from, size_t i) {
  to.add_point(from.features_of(i), from.values_of(i), from.labels_of(i));
}
PackedKind kind_of(const CtrBatch*) { return PackedKind::clicks; }
PackedKind kind_of(const SparseBatch*) { return PackedKind::points; }

// Keeps the samples of `block` whose file indices are not in `held`.
template <class Pool>
void append_kept(const Pool& all, uint64_t first, std::span<const uint64_t> held, Pool& out) {
  auto next_held = std::lower_bound(held.begin(), held.end(), first);
  for (size_t i = 0; i < pool_size(all); ++i) {
    if (next_held != held.end() && *next_held == first + i) {
      ++next_held;
      continue;
    }
    append_one(out, all, i);
  }
}

}  // namespace

template <>
void read_stream_block<CtrBatch>(PackedReader& reader, uint64_t block, std::span<const uint64_t> held, CtrBatch& out) {
  std::vector<CtrRecord> rows;
  reader.read_clicks(block, rows);
  CtrBatch all;
  for (const CtrRecord& r : rows) append_record(r, all);
  append_kept(all, reader.header().block_first(block), held, out);
}

template <>
void read_stream_block<SparseBatch>(PackedReader& reader, uint64_t block, std::span<const uint64_t> held,
                                    SparseBatch& out) {
  const uint64_t first = reader.header().block_first(block);
  if (held_in(held, first, reader.header().block_size(block)) == 0) {
    reader.read_points(block, out);  // nothing to leave out: appended in place
    return;
  }
  SparseBatch all;
  reader.read_points(block, all);
  append_kept(all, first, held, out);
}

template <class Pool>
size_t BlockStream<Pool>::points(const Pool& batch) {
  return pool_size(batch);
}

// Reads this rank's blocks in order on a thread of its own, at most `capacity` ahead.
template <class Pool>
struct BlockStream<Pool>::Prefetch {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Pool> ready;
  size_t capacity = 1;
  bool stop = false, done = false;
  std::exception_ptr error;
  std::thread thread;

  Prefetch(PackedReader& reader, std::vector<uint64_t> blocks, std::span<const uint64_t> held, size_t ahead)
      : capacity(std::max<size_t>(1, ahead)) {
    thread = std::thread([this, &reader, blocks = std::move(blocks), held] {
      try {
        for (const uint64_t b : blocks) {
          Pool batch;
          read_stream_block(reader, b, held, batch);
          std::unique_lock lock(mutex);
          changed.wait(lock, [&] { return stop || ready.size() < capacity; });
          if (stop) return;
          ready.push_back(std::move(batch));
          changed.notify_all();
        }
      } catch (...) {
        const std::lock_guard lock(mutex);
        error = std::current_exception();
      }
      const std::lock_guard lock(mutex);
      done = true;
      changed.notify_all();
    });
  }
  ~Prefetch() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
      changed.notify_all();
    }
    thread.join();
  }
  // The next block's samples; false when every block has been taken.
  bool take(Pool& out) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return !ready.empty() || done; });
    if (ready.empty()) {
      if (error) std::rethrow_exception(error);
      return false;
    }
    out = std::move(ready.front());
    ready.pop_front();
    changed.notify_all();
    return true;
  }
};

template <class Pool>
BlockStream<Pool>::BlockStream(PackedReader& reader, const BlockStreamOptions& options)
    : reader_(reader), options_(options), rank_(options.rank) {
  const PackedHeader& h = reader.header();
  const PackedKind kind = kind_of(static_cast<const Pool*>(nullptr));
  FRUGAL_CHECK(h.kind == kind, fmt::format("{}: {}", reader.path(), h.kind == PackedKind::clicks
                                                                       ? "packed Criteo click logs, not a sparse data set"
                                                                       : "a packed sparse data set, not click logs"));
  FRUGAL_CHECK(options.ranks > 0 && options.rank < options.ranks && options.batch >= options.ranks,
               fmt::format("{}: a stream for rank {} of {} with a global batch of {}", reader.path(), options.rank,
                           options.ranks, options.batch));
  FRUGAL_CHECK(std::is_sorted(options.held_back.begin(), options.held_back.end()),
               "BlockStream: the held-back samples must be in ascending order");
  for (const uint32_t b : shuffled_order(h.blocks(), Rng(options.seed).split(0xb10c).next_u64())) order_.push_back(b);
  samples_.assign(options.ranks, 0);
  for (size_t p = 0; p < order_.size(); ++p) {
    const uint64_t b = order_[p];
    samples_[p % options.ranks] += h.block_size(b) - held_in(options.held_back, h.block_first(b), h.block_size(b));
  }
  const std::vector<size_t> bounds = slice_bounds(options.batch, options.ranks);
  for (size_t r = 0; r < options.ranks; ++r) {
    part_size_.push_back(bounds[r + 1] - bounds[r]);
    steps_ = std::max(steps_, (samples_[r] + part_size_[r] - 1) / part_size_[r]);
    global_samples_ += samples_[r];
  }
}

template <class Pool>
BlockStream<Pool>::~BlockStream() = default;

template <class Pool>
std::vector<uint64_t> BlockStream<Pool>::blocks_of(size_t rank) const {
  std::vector<uint64_t> out;
  for (size_t p = rank; p < order_.size(); p += options_.ranks) out.push_back(order_[p]);
  return out;
}

template <class Pool>
size_t BlockStream<Pool>::part_of(size_t rank, size_t step) const {
  const size_t taken = std::min(samples_[rank], step * part_size_[rank]);
  return std::min(part_size_[rank], samples_[rank] - taken);
}

template <class Pool>
void BlockStream<Pool>::refill() {
  // The reader thread starts with the first batch asked for: a stream made to count its steps reads nothing.
  if (!prefetch_)
    prefetch_ = std::make_unique<Prefetch>(reader_, blocks_of(rank_), options_.held_back, kReadAhead);
  // The next window's blocks as the reader made them (no copy), the last window's freed first:
  // memory holds one window and the blocks read ahead. Its samples are served in a seeded order.
  window_.clear();
  shuffled_.clear();
  Pool block;
  for (size_t w = 0; w < std::max<size_t>(1, options_.window_blocks) && prefetch_->take(block); ++w) {
    for (size_t i = 0; i < pool_size(block); ++i)
      shuffled_.push_back({static_cast<uint32_t>(window_.size()), static_cast<uint32_t>(i)});
    window_.push_back(std::move(block));
    block = Pool{};
  }
  Rng rng = Rng(options_.seed).split(1000 + windows_++);
  for (size_t i = shuffled_.size(); i > 1; --i) std::swap(shuffled_[i - 1], shuffled_[rng.below(i)]);
  served_ = 0;
}

template <class Pool>
bool BlockStream<Pool>::next(Pool& out, size_t* global_size) {
  if (step_ >= steps_) return false;
  const size_t n = part_of(rank_, step_);
  size_t global = 0;
  for (size_t r = 0; r < options_.ranks; ++r) global += part_of(r, step_);
  out.clear();
  while (pool_size(out) < n) {
    if (served_ == shuffled_.size()) {
      refill();
      FRUGAL_CHECK(!shuffled_.empty(), fmt::format("{}: the stream ran out of samples at step {} of {}", reader_.path(),
                                                  step_ + 1, steps_));
    }
    const auto [b, i] = shuffled_[served_++];
    append_one(out, window_[b], i);
  }
  ++step_;
  if (global_size != nullptr) *global_size = global;
  return true;
}

template <class Pool>
void BlockStream<Pool>::skip(size_t steps) {
  Pool scratch;
  for (size_t i = 0; i < steps && next(scratch); ++i) {
  }
}

template class BlockStream<CtrBatch>;
template class BlockStream<SparseBatch>;

}  // namespace frugal::data
