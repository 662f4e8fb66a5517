#include "core/data/ctr_stream.h"

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
#include "core/data/ctr_split.h"
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

// Block `block`'s samples as a batch holds them, the held-back ones left out.
void read_block(PackedReader& reader, uint64_t block, std::span<const uint64_t> held, CtrBatch& out) {
  std::vector<CtrRecord> rows;
  reader.read_clicks(block, rows);
  const uint64_t first = reader.header().block_first(block);
  auto next_held = std::lower_bound(held.begin(), held.end(), first);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (next_held != held.end() && *next_held == first + i) {
      ++next_held;
      continue;
    }
    append_record(rows[i], out);
  }
}

}  // namespace

// Reads this rank's blocks in order on a thread of its own, at most `capacity` ahead.
struct CtrStream::Prefetch {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<CtrBatch> ready;
  size_t capacity = 1;
  bool stop = false, done = false;
  std::exception_ptr error;
  std::thread thread;

  Prefetch(PackedReader& reader, std::vector<uint64_t> blocks, std::span<const uint64_t> held, size_t ahead)
      : capacity(std::max<size_t>(1, ahead)) {
    thread = std::thread([this, &reader, blocks = std::move(blocks), held] {
      try {
        for (const uint64_t b : blocks) {
          CtrBatch batch;
          read_block(reader, b, held, batch);
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
  bool take(CtrBatch& out) {
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

CtrStream::CtrStream(PackedReader& reader, const CtrStreamOptions& options)
    : reader_(reader), options_(options), rank_(options.rank) {
  const PackedHeader& h = reader.header();
  FRUGAL_CHECK(h.kind == PackedKind::clicks, fmt::format("{}: a packed sparse data set, not click logs", reader.path()));
  FRUGAL_CHECK(options.ranks > 0 && options.rank < options.ranks && options.batch >= options.ranks,
               fmt::format("CtrStream: rank {} of {} with a global batch of {}", options.rank, options.ranks,
                           options.batch));
  FRUGAL_CHECK(std::is_sorted(options.held_back.begin(), options.held_back.end()),
               "CtrStream: the held-back samples must be in ascending order");
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

CtrStream::~CtrStream() = default;

std::vector<uint64_t> CtrStream::blocks_of(size_t rank) const {
  std::vector<uint64_t> out;
  for (size_t p = rank; p < order_.size(); p += options_.ranks) out.push_back(order_[p]);
  return out;
}

size_t CtrStream::part_of(size_t rank, size_t step) const {
  const size_t taken = std::min(samples_[rank], step * part_size_[rank]);
  return std::min(part_size_[rank], samples_[rank] - taken);
}

void CtrStream::refill() {
  // The reader thread starts with the first batch asked for: a stream made to count its steps reads nothing.
  if (!prefetch_)
    prefetch_ = std::make_unique<Prefetch>(reader_, blocks_of(rank_), options_.held_back, kReadAhead);
  // What the last window left, then the next window's blocks, shuffled together.
  CtrBatch pool;
  for (size_t i = served_; i < shuffled_.size(); ++i) pool.append(pool_, shuffled_[i]);
  pool_ = CtrBatch{};  // freed before the next blocks come in: memory holds one window, not two
  CtrBatch block;
  for (size_t w = 0; w < std::max<size_t>(1, options_.window_blocks) && prefetch_->take(block); ++w)
    for (size_t i = 0; i < block.size; ++i) pool.append(block, i);
  pool_ = std::move(pool);
  shuffled_.resize(pool_.size);
  for (size_t i = 0; i < pool_.size; ++i) shuffled_[i] = static_cast<uint32_t>(i);
  Rng rng = Rng(options_.seed).split(1000 + window_++);
  for (size_t i = shuffled_.size(); i > 1; --i) std::swap(shuffled_[i - 1], shuffled_[rng.below(i)]);
  served_ = 0;
}

bool CtrStream::next(CtrBatch& out, size_t* global_size) {
  if (step_ >= steps_) return false;
  const size_t n = part_of(rank_, step_);
  size_t global = 0;
  for (size_t r = 0; r < options_.ranks; ++r) global += part_of(r, step_);
  out.clear();
  out.reserve(n);
  while (out.size < n) {
    if (served_ == shuffled_.size()) {
      refill();
      FRUGAL_CHECK(!shuffled_.empty(), fmt::format("{}: the stream ran out of samples at step {} of {}", reader_.path(),
                                                  step_ + 1, steps_));
    }
    out.append(pool_, shuffled_[served_++]);
  }
  ++step_;
  if (global_size != nullptr) *global_size = global;
  return true;
}

void CtrStream::skip(size_t steps) {
  CtrBatch scratch;
  for (size_t i = 0; i < steps && next(scratch); ++i) {
  }
}

void for_each_block(PackedReader& reader, std::span<const uint64_t> held_back,
                    const std::function<void(const CtrBatch&)>& visit) {
  for (uint64_t b = 0; b < reader.header().blocks(); ++b) {
    CtrBatch batch;
    read_block(reader, b, held_back, batch);
    visit(batch);
  }
}

CtrHeldBack hold_back_blocks(PackedReader& reader, size_t count, uint64_t seed) {
  const PackedHeader& h = reader.header();
  FRUGAL_CHECK(h.kind == PackedKind::clicks, fmt::format("{}: a packed sparse data set, not click logs", reader.path()));
  CtrHeldBack out;
  if (count == 0 || h.points == 0) return out;
  // Blocks in a seeded order until they hold 4 x count samples: the share comes from several places
  // in the file (a log in time order), at most a quarter of each.
  std::vector<uint64_t> chosen;
  uint64_t samples = 0;
  for (const uint32_t b : shuffled_order(h.blocks(), Rng(seed).split(0x4e1d).next_u64())) {
    if (samples >= 4 * static_cast<uint64_t>(count)) break;
    chosen.push_back(b);
    samples += h.block_size(b);
  }
  std::sort(chosen.begin(), chosen.end());
  CtrDataset pool;
  std::vector<uint64_t> index;  // pool's samples' indices in the file
  for (const uint64_t b : chosen) {
    read_block(reader, b, {}, pool);
    for (uint64_t i = 0; i < h.block_size(b); ++i) index.push_back(h.block_first(b) + i);
  }
  const double rate = std::min(0.5, static_cast<double>(count) / static_cast<double>(pool.size));
  CtrSplit split = split_ctr(pool, rate, seed);
  for (const uint32_t i : split.test_rows) out.indices.push_back(index[i]);
  out.samples = std::move(split.test);
  return out;
}

}  // namespace frugal::data
