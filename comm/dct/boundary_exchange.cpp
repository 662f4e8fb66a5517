#include "comm/dct/boundary_exchange.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "comm/dct/largest.h"
#include "comm/dct/scaled_int8.h"
#include "core/communicator.h"
#include "core/check.h"
#include "core/hash32.h"

namespace frugal::comm {

namespace {
bool active(const Placement& p) { return p.is_sliced(); }

}  // namespace

BoundaryExchange::BoundaryExchange(const Placement& placement, size_t width, const MpCompression& options, int tag)
    : placement_(placement), width_(width), options_(options), tag_(tag) {
  options_.validate();
  bounds_ = placement_.bounds(width_);
  kept_.resize(placement_.parts());
  size_t widest = 0;
  for (int r = 0; r < placement_.parts(); ++r) widest = std::max(widest, bounds_[r + 1] - bounds_[r]);
  wide_indices_ = widest > 65536;
  positions_.resize(placement_.parts());
  offsets_.resize(placement_.parts());
  set_step(UINT64_MAX);
}

void BoundaryExchange::set_step(uint64_t step) {
  step_ = step;
  compress_ = options_.wire != ValueType::f32 || adaptive();
  for (int r = 0; r < placement_.parts(); ++r) {
    const size_t w = bounds_[r + 1] - bounds_[r];
    kept_[r] = options_.kept_of(w, step);
    compress_ = compress_ || kept_[r] < w;
  }
}

void BoundaryExchange::select_top_k(const Tensor& local) {
  const int me = placement_.rank();
  const size_t b = local.rows(), w = local.cols(), k = kept_[me];
  auto& pos = positions_[me];
  auto& off = offsets_[me];
  pos.clear();
  off.assign(1, 0);
  std::vector<uint32_t> order;
  for (size_t i = 0; i < b; ++i) {
    const float* v = local.row(i);
    if (!adaptive()) {
      largest_ascending(v, w, k, order);
      pos.insert(pos.end(), order.begin(), order.end());
      off.push_back(pos.size());
      continue;
    }
    // Adaptive: the fewest of the top k whose magnitudes cover `mass` of the slice's L1 mass.
    partition_largest(v, w, k, order);
    double total = 0.0;
    for (size_t j = 0; j < w; ++j) total += std::abs(v[j]);
    std::sort(order.begin(), order.begin() + k, LargerMagnitude{v});
    const double target = options_.mass * total;
    double covered = 0.0;
    size_t count = 0;
    while (count < k && covered < target) covered += std::abs(v[order[count++]]);
    std::sort(order.begin(), order.begin() + count);
    pos.insert(pos.end(), order.begin(), order.begin() + count);
    off.push_back(pos.size());
  }
}

std::vector<size_t> BoundaryExchange::block_sizes(size_t batch) const {
  std::vector<size_t> counts(placement_.parts());
  for (int r = 0; r < placement_.parts(); ++r) counts[r] = batch * (bounds_[r + 1] - bounds_[r]);
  return counts;
}

std::vector<size_t> BoundaryExchange::block_counts(size_t batch) {
  std::vector<size_t> counts = block_sizes(batch);
  exchange_.resize(1, std::accumulate(counts.begin(), counts.end(), size_t{0}));
  return counts;
}

size_t BoundaryExchange::row_bytes(size_t n) const {
  return options_.wire == ValueType::i8 ? scaled_i8_bytes(n) : n * value_bytes(options_.wire);
}

size_t BoundaryExchange::values_bytes(int rank) const {
  const auto& off = offsets_[rank];
  size_t bytes = 0;
  for (size_t i = 0; i + 1 < off.size(); ++i) bytes += row_bytes(off[i + 1] - off[i]);
  return bytes;
}

void BoundaryExchange::put_row(std::span<const float> values, std::byte* out, uint32_t stochastic_key) const {
  if (options_.wire == ValueType::i8) {
    write_scaled_i8(values, out, stochastic_key);
    return;
  }
  const size_t vb = value_bytes(options_.wire);
  for (float v : values) write_value(options_.wire, v, out), out += vb;
}

void BoundaryExchange::get_row(const std::byte* in, std::span<float> values) const {
  if (options_.wire == ValueType::i8) {
    read_scaled_i8(in, values);
    return;
  }
  const size_t vb = value_bytes(options_.wire);
  for (float& v : values) v = read_value(options_.wire, in), in += vb;
}

uint32_t BoundaryExchange::gradient_rounding_key(int to, size_t sample) const {
  // Distinct per step, boundary, sender, receiver and sample; never 0 (round to nearest).
  const int parts = placement_.parts();
  uint32_t h = lowbias32(static_cast<uint32_t>(step_) ^ lowbias32(static_cast<uint32_t>(step_ >> 32) + static_cast<uint32_t>(tag_)));
  h = lowbias32(h + static_cast<uint32_t>(placement_.rank() * parts + to));
  return lowbias32(h + static_cast<uint32_t>(sample)) | 1u;
}

bool BoundaryExchange::has_positions(int rank) const {
  // A slice kept whole needs no positions.
  return adaptive() || kept_[rank] < bounds_[rank + 1] - bounds_[rank];
}

void BoundaryExchange::write_index(uint32_t value) {
  if (value < kEscape) {
    message_.push_back(static_cast<std::byte>(value));
    return;
  }
  message_.push_back(static_cast<std::byte>(kEscape));
  const auto narrow = static_cast<uint16_t>(value);
  const size_t n = wide_indices_ ? 4 : 2;
  const size_t at = message_.size();
  message_.resize(at + n);
  std::memcpy(message_.data() + at, wide_indices_ ? static_cast<const void*>(&value) : &narrow, n);
}

void BoundaryExchange::write_positions(int rank) {
  // Per sample (adaptive: after its count, coded alike), ascending: each position as its gap to the
  // previous one (the first: to -1) in one byte, or, for gaps of 255 and more, the escape byte 255
  // and the position itself in 2 bytes (4 for slices wider than 65536). Top-k positions of a wide
  // slice are mostly close together.
  const auto& pos = positions_[rank];
  const auto& off = offsets_[rank];
  for (size_t i = 0; i + 1 < off.size(); ++i) {
    if (adaptive()) write_index(static_cast<uint32_t>(off[i + 1] - off[i]));
    for (size_t j = off[i]; j < off[i + 1]; ++j) {
      const uint32_t p = pos[j], next = j == off[i] ? 0 : pos[j - 1] + 1;
      // A gap below 255 is one byte; else the escape and the position itself (>= the gap >= 255).
      write_index(p - next < kEscape ? p - next : p);
    }
  }
}

void BoundaryExchange::fixed_offsets(int rank, size_t batch) {
  auto& off = offsets_[rank];
  off.resize(batch + 1);
  for (size_t i = 0; i <= batch; ++i) off[i] = i * kept_[rank];
}

const std::byte* BoundaryExchange::read_positions(int from, const std::vector<std::byte>& bytes, size_t batch) {
  const size_t cap = kept_[from], w = bounds_[from + 1] - bounds_[from];
  auto& pos = positions_[from];
  auto& off = offsets_[from];
  const std::byte* in = bytes.data();
  const std::byte* end = in + bytes.size();
  auto fail = [&](const std::string& what) {
    throw Error(fmt::format("model-parallel exchange: rank {} sent a bad activation message ({} bytes, {} samples x {} "
                            "kept{}): {}; the ranks disagree on the batch or on MpCompression::keep, or the bytes are "
                            "damaged", from, bytes.size(), batch, cap, adaptive() ? " at most" : "", what));
  };
  // One index: a byte below 255, else the escape and the value in 2 (or 4) bytes; `escaped` says which.
  bool escaped = false;
  auto index = [&](size_t sample, const char* what) -> uint32_t {
    if (in == end) fail(fmt::format("it ends within the {} of sample {}", what, sample));
    const auto first = static_cast<uint8_t>(*in++);
    escaped = first == kEscape;
    if (!escaped) return first;
    const size_t n = wide_indices_ ? 4 : 2;
    if (static_cast<size_t>(end - in) < n) fail(fmt::format("it ends within an escaped {} of sample {}", what, sample));
    uint16_t narrow = 0;
    uint32_t value = 0;
    std::memcpy(wide_indices_ ? static_cast<void*>(&value) : &narrow, in, n);
    in += n;
    return wide_indices_ ? value : narrow;
  };
  if (!has_positions(from)) {
    fixed_offsets(from, batch);
    pos.resize(batch * cap);
    for (size_t j = 0; j < pos.size(); ++j) pos[j] = static_cast<uint32_t>(j % cap);  // kept whole
  } else {
    pos.clear();
    off.assign(1, 0);
    for (size_t i = 0; i < batch; ++i) {
      const size_t count = adaptive() ? index(i, "count") : cap;
      if (count > cap) fail(fmt::format("sample {} keeps {} activations, more than the {} allowed", i, count, cap));
      for (size_t j = 0; j < count; ++j) {
        const uint32_t coded = index(i, "positions");
        // A byte below 255 is a gap; an escaped value is the position itself.
        const uint32_t p = escaped ? coded : (j == 0 ? 0 : pos.back() + 1) + coded;
        if (p >= w || (j != 0 && p <= pos.back()))
          fail(fmt::format("position {} of sample {} is not ascending within its slice of {} neurons", p, i, w));
        pos.push_back(p);
      }
      off.push_back(pos.size());
    }
  }
  const size_t value_bytes_expected = values_bytes(from);
  if (static_cast<size_t>(end - in) != value_bytes_expected)
    fail(fmt::format("{} value bytes follow the positions, expected {} ({} values as {})", end - in,
                     value_bytes_expected, pos.size(), to_string(options_.wire)));
  return in;
}

const Tensor& BoundaryExchange::gather(const Tensor& local) {
  if (!active(placement_)) return local;
  Communicator& group = *placement_.group;
  const int me = placement_.rank(), parts = placement_.parts();
  const size_t b = local.rows();
  FRUGAL_CHECK(local.cols() == bounds_[me + 1] - bounds_[me],
               fmt::format("model-parallel exchange: the slice has {} columns, expected {}", local.cols(),
                           bounds_[me + 1] - bounds_[me]));
  if (!compress_) {
    gather_rows(local, 0, b);
    return finish_gather(local);
  }
  check_no_gather_in_flight("a compressed gather");
  payload_uncompressed_ += (parts - 1) * b * local.cols() * sizeof(float);
  gathered_.resize(b, width_);
  select_top_k(local);
  message_.clear();
  if (has_positions(me)) write_positions(me);
  const auto& mine = positions_[me];
  const auto& off = offsets_[me];
  const size_t values_at = message_.size();
  message_.resize(values_at + values_bytes(me));
  std::byte* out = message_.data() + values_at;
  for (size_t i = 0; i < b; ++i) {
    row_.resize(off[i + 1] - off[i]);
    for (size_t j = off[i]; j < off[i + 1]; ++j) row_[j - off[i]] = local.at(i, mine[j]);
    put_row(row_, out);
    out += row_bytes(row_.size());
  }
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(message_, all).wait();
  payload_sent_ += (parts - 1) * message_.size();
  gathered_.zero();
  for (int r = 0; r < parts; ++r) {  // every rank decodes every message, its own included: one result
    const std::byte* in = read_positions(r, all[r], b);
    const auto& pos = positions_[r];
    const auto& off_r = offsets_[r];
    for (size_t i = 0; i < b; ++i) {
      row_.resize(off_r[i + 1] - off_r[i]);
      get_row(in, row_);
      in += row_bytes(row_.size());
      for (size_t j = off_r[i]; j < off_r[i + 1]; ++j) gathered_.at(i, bounds_[r] + pos[j]) = row_[j - off_r[i]];
    }
  }
  return gathered_;
}

bool BoundaryExchange::gathers_in_parts() const { return active(placement_) && !compress_; }

void BoundaryExchange::gather_rows(const Tensor& local, size_t first, size_t count) {
  FRUGAL_CHECK(gathers_in_parts(), "model-parallel exchange: a compressed or inactive boundary gathers whole");
  const int me = placement_.rank(), parts = placement_.parts();
  const size_t b = local.rows(), w_me = bounds_[me + 1] - bounds_[me];
  FRUGAL_CHECK(local.cols() == w_me, fmt::format("model-parallel exchange: the slice has {} columns, expected {}",
                                                 local.cols(), w_me));
  FRUGAL_CHECK(first <= b && count <= b - first, fmt::format("model-parallel exchange: rows {}..{} are not in a "
                                                             "batch of {}", first, first + count, b));
  // A new batch starts at row 0 (a part still in flight is waited for first); every other part
  // follows the one before, of the same batch.
  FRUGAL_CHECK(first == 0 || (gather_ && first == gather_first_ + gather_count_ && b == gathered_.rows()),
               fmt::format("model-parallel exchange: rows {}..{} of a batch of {} do not follow the part before",
                           first, first + count, b));
  land_gathered_part();
  if (first == 0) gathered_.resize(b, width_);
  const auto counts = block_counts(count);
  // Rows [first, first + count) of this rank's slice are one contiguous block of `local`.
  gather_ = placement_.group->all_gatherv(local.span().subspan(first * w_me, count * w_me), exchange_.span(), counts);
  gather_first_ = first;
  gather_count_ = count;
  const uint64_t bytes = (parts - 1) * count * w_me * sizeof(float);
  payload_uncompressed_ += bytes;
  payload_sent_ += bytes;
}

namespace {
// Takes the collective out of `work` (left empty) and waits for it; false if there was none.
bool wait_for(std::optional<Work>& work) {
  if (!work) return false;
  Work w = std::move(*work);
  work.reset();
  w.wait();
  return true;
}

// wait_for, with the collective's own error dropped: the caller is already failing.
void wait_quietly(std::optional<Work>& work) {
  try {
    wait_for(work);
  } catch (...) {
  }
}
}  // namespace

void BoundaryExchange::land_gathered_part() {
  if (!wait_for(gather_)) return;
  // The gathered buffer holds each rank's block of the part's rows in turn; interleave them into
  // those rows of B x H.
  const auto offsets = displacements(block_sizes(gather_count_));
  for (int r = 0; r < placement_.parts(); ++r) {
    const size_t w_r = bounds_[r + 1] - bounds_[r];
    for (size_t i = 0; i < gather_count_; ++i)
      std::copy_n(exchange_.data() + offsets[r] + i * w_r, w_r, gathered_.row(gather_first_ + i) + bounds_[r]);
  }
}

void BoundaryExchange::abandon_gather() { wait_quietly(gather_); }

BoundaryExchange::~BoundaryExchange() {
  wait_quietly(gather_);
  wait_quietly(scatter_);
}

void BoundaryExchange::check_no_gather_in_flight(const char* what) const {
  FRUGAL_CHECK(!gather_, fmt::format("model-parallel exchange: {} while a gather in parts is unfinished "
                                     "(finish_gather or abandon_gather first)", what));
}

const Tensor& BoundaryExchange::finish_gather(const Tensor& local) {
  if (!gathers_in_parts()) return gather(local);
  const size_t end = gather_ ? gather_first_ + gather_count_ : 0;
  land_gathered_part();
  FRUGAL_CHECK(end == local.rows(), fmt::format("model-parallel exchange: the parts gathered cover {} of {} rows",
                                                end, local.rows()));
  return gathered_;
}

void BoundaryExchange::start_reduce_scatter(const Tensor& partial) {
  check_no_gather_in_flight("a reduce-scatter");
  if (compress_) {
    reduce_scatter(partial);  // slice_ holds the result
    return;
  }
  Communicator& group = *placement_.group;
  const int me = placement_.rank();
  const size_t b = partial.rows(), mine = bounds_[me + 1] - bounds_[me];
  FRUGAL_CHECK(partial.cols() == width_, fmt::format("model-parallel exchange: the gradient has {} columns, expected {}",
                                                     partial.cols(), width_));
  payload_uncompressed_ += b * (width_ - mine) * sizeof(float);
  slice_.resize(b, mine);
  const std::vector<size_t> counts = pack_blocks(partial);
  scatter_ = group.reduce_scatterv(exchange_.span(), slice_.span(), counts);
  payload_sent_ += b * (width_ - mine) * sizeof(float);
}

const Tensor& BoundaryExchange::finish_reduce_scatter() {
  wait_for(scatter_);
  return slice_;
}

std::vector<size_t> BoundaryExchange::pack_blocks(const Tensor& partial) {
  const int parts = placement_.parts();
  const size_t b = partial.rows();
  std::vector<size_t> counts = block_counts(b);
  const auto offsets = displacements(counts);
  for (int r = 0; r < parts; ++r) {
    const size_t w = bounds_[r + 1] - bounds_[r];
    for (size_t i = 0; i < b; ++i) std::copy_n(partial.row(i) + bounds_[r], w, exchange_.data() + offsets[r] + i * w);
  }
  return counts;
}

const Tensor& BoundaryExchange::reduce_scatter(const Tensor& partial) {
  check_no_gather_in_flight("a reduce-scatter");
  Communicator& group = *placement_.group;
  const int me = placement_.rank(), parts = placement_.parts();
  const size_t b = partial.rows(), mine = bounds_[me + 1] - bounds_[me];
  FRUGAL_CHECK(partial.cols() == width_, fmt::format("model-parallel exchange: the gradient has {} columns, expected {}",
                                                     partial.cols(), width_));
  payload_uncompressed_ += b * (width_ - mine) * sizeof(float);
  slice_.resize(b, mine);
  if (!compress_) {
    const std::vector<size_t> counts = pack_blocks(partial);
    group.reduce_scatterv(exchange_.span(), slice_.span(), counts).wait();
    payload_sent_ += b * (width_ - mine) * sizeof(float);
    return slice_;
  }
  // Each peer gets our partial gradient at its kept positions, in the order it sent them.
  std::vector<Work> sends;
  if (options_.error_feedback) feedback_.resize(static_cast<size_t>(parts));
  for (int r = 0; r < parts; ++r) {
    if (r == me) continue;
    const auto& pos = positions_[r];
    const auto& off = offsets_[r];
    const size_t w = bounds_[r + 1] - bounds_[r];
    Tensor* fb = options_.error_feedback ? &feedback_[static_cast<size_t>(r)] : nullptr;
    if (fb != nullptr && fb->rows() < b) {  // a larger batch: the new rows start with nothing held back
      Tensor grown(b, w);
      for (size_t i = 0; i < fb->rows(); ++i) std::copy_n(fb->row(i), w, grown.row(i));
      *fb = std::move(grown);
    }
    message_.resize(values_bytes(r));
    std::byte* out = message_.data();
    for (size_t i = 0; i < b; ++i) {
      row_.resize(off[i + 1] - off[i]);
      // With error feedback the share is this step's plus what earlier steps held back at this row.
      if (fb != nullptr)
        for (size_t c = 0; c < w; ++c) fb->at(i, c) += partial.at(i, bounds_[r] + c);
      for (size_t j = off[i]; j < off[i + 1]; ++j)
        row_[j - off[i]] = fb != nullptr ? fb->at(i, pos[j]) : partial.at(i, bounds_[r] + pos[j]);
      put_row(row_, out, gradient_rounding_key(r, i));
      if (fb != nullptr) {  // keep what did not go: the dropped positions, and the rounding of the rest
        get_row(out, row_);
        for (size_t j = off[i]; j < off[i + 1]; ++j) fb->at(i, pos[j]) -= row_[j - off[i]];
      }
      out += row_bytes(row_.size());
    }
    sends.push_back(group.send(r, tag_, message_));  // send copies the bytes
    payload_sent_ += message_.size();
  }
  // Sum the contributions in rank order (ours unrounded: it never travels), so the result does
  // not depend on arrival order.
  const auto& pos = positions_[me];
  const auto& off = offsets_[me];
  const size_t expected = values_bytes(me);
  slice_.zero();
  std::vector<std::byte> received;
  for (int r = 0; r < parts; ++r) {
    if (r == me) {
      if (options_.straight_through_at(step_)) {  // our own share at every position: it costs no bytes
        for (size_t i = 0; i < b; ++i)
          for (size_t j = 0; j < mine; ++j) slice_.at(i, j) += partial.at(i, bounds_[me] + j);
        continue;
      }
      for (size_t i = 0; i < b; ++i)
        for (size_t j = off[i]; j < off[i + 1]; ++j) slice_.at(i, pos[j]) += partial.at(i, bounds_[me] + pos[j]);
      continue;
    }
    group.recv(r, tag_, received).wait();
    FRUGAL_CHECK(received.size() == expected,
                 fmt::format("model-parallel exchange: rank {} sent {} bytes of gradients, expected {} ({} samples, {} "
                             "kept values as {})",
                             r, received.size(), expected, b, pos.size(), to_string(options_.wire)));
    const std::byte* in = received.data();
    for (size_t i = 0; i < b; ++i) {
      row_.resize(off[i + 1] - off[i]);
      get_row(in, row_);
      in += row_bytes(row_.size());
      for (size_t j = off[i]; j < off[i + 1]; ++j) slice_.at(i, pos[j]) += row_[j - off[i]];
    }
  }
  for (Work& w : sends) w.wait();
  return slice_;
}

const Tensor& BoundaryExchange::own_slice(const Tensor& full) {
  const int me = placement_.rank();
  const size_t b = full.rows(), mine = bounds_[me + 1] - bounds_[me];
  slice_.resize(b, mine);
  if (!compress_ || !active(placement_) || options_.straight_through_at(step_)) {
    for (size_t i = 0; i < b; ++i) std::copy_n(full.row(i) + bounds_[me], mine, slice_.row(i));
    return slice_;
  }
  const auto& pos = positions_[me];
  const auto& off = offsets_[me];
  slice_.zero();
  for (size_t i = 0; i < b; ++i)
    for (size_t j = off[i]; j < off[i + 1]; ++j) slice_.at(i, pos[j]) = full.at(i, bounds_[me] + pos[j]);
  return slice_;
}

}  // namespace frugal::comm
