#include "comm/dct/boundary_exchange.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/communicator.h"
#include "core/check.h"

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
  set_step(UINT64_MAX);
}

void BoundaryExchange::set_step(uint64_t step) {
  compress_ = options_.wire != ValueType::f32;
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
  pos.resize(b * k);
  std::vector<uint32_t> order(w);
  for (size_t i = 0; i < b; ++i) {
    const float* v = local.row(i);
    std::iota(order.begin(), order.end(), 0u);
    if (k < w)  // largest magnitudes first; the lower index wins a tie, so every rank agrees
      std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), [v](uint32_t a, uint32_t c) {
        const float fa = std::abs(v[a]), fc = std::abs(v[c]);
        return fa > fc || (fa == fc && a < c);
      });
    std::sort(order.begin(), order.begin() + k);
    std::copy_n(order.begin(), k, pos.begin() + i * k);
  }
}

std::vector<size_t> BoundaryExchange::block_counts(size_t batch) {
  std::vector<size_t> counts(placement_.parts());
  for (int r = 0; r < placement_.parts(); ++r) counts[r] = batch * (bounds_[r + 1] - bounds_[r]);
  exchange_.resize(1, std::accumulate(counts.begin(), counts.end(), size_t{0}));
  return counts;
}

bool BoundaryExchange::has_positions(int rank) const {
  // A slice kept whole needs no positions.
  return kept_[rank] < bounds_[rank + 1] - bounds_[rank];
}

void BoundaryExchange::write_positions(std::span<const uint32_t> positions, size_t per_sample) {
  // Per sample, ascending: each position as its gap to the previous one (the first: to -1) in one
  // byte, or, for gaps of 255 and more, the escape byte 255 and the position itself in 2 bytes
  // (4 for slices wider than 65536). Top-k positions of a wide slice are mostly close together.
  for (size_t j = 0; j < positions.size(); ++j) {
    const uint32_t p = positions[j];
    const uint32_t next = j % per_sample == 0 ? 0 : positions[j - 1] + 1;
    if (p - next < kEscape) {
      message_.push_back(static_cast<std::byte>(p - next));
      continue;
    }
    message_.push_back(static_cast<std::byte>(kEscape));
    const auto narrow = static_cast<uint16_t>(p);
    const size_t n = wide_indices_ ? 4 : 2;
    const size_t at = message_.size();
    message_.resize(at + n);
    std::memcpy(message_.data() + at, wide_indices_ ? static_cast<const void*>(&p) : &narrow, n);
  }
}

const std::byte* BoundaryExchange::read_positions(int from, const std::vector<std::byte>& bytes, size_t batch) {
  const size_t kr = kept_[from], w = bounds_[from + 1] - bounds_[from], vb = value_bytes(options_.wire);
  auto& pos = positions_[from];
  pos.resize(batch * kr);
  const std::byte* in = bytes.data();
  const std::byte* end = in + bytes.size();
  auto fail = [&](const std::string& what) {
    throw Error(fmt::format("model-parallel exchange: rank {} sent a bad activation message ({} bytes, {} samples x {} "
                            "kept): {}; the ranks disagree on the batch or on MpCompression::keep, or the bytes are "
                            "damaged", from, bytes.size(), batch, kr, what));
  };
  for (size_t j = 0; j < batch * kr; ++j) {
    uint32_t p = static_cast<uint32_t>(j % kr);  // kept whole: position j of the sample
    if (has_positions(from)) {
      if (in == end) fail(fmt::format("it ends within the positions of sample {}", j / kr));
      const auto gap = static_cast<uint8_t>(*in++);
      const uint32_t next = j % kr == 0 ? 0 : pos[j - 1] + 1;
      if (gap < kEscape) {
        p = next + gap;
      } else {
        const size_t n = wide_indices_ ? 4 : 2;
        if (static_cast<size_t>(end - in) < n) fail(fmt::format("it ends within an escaped position of sample {}", j / kr));
        uint16_t narrow = 0;
        p = 0;
        std::memcpy(wide_indices_ ? static_cast<void*>(&p) : &narrow, in, n);
        if (!wide_indices_) p = narrow;
        in += n;
      }
      if (p >= w || (j % kr != 0 && p <= pos[j - 1]))
        fail(fmt::format("position {} of sample {} is not ascending within its slice of {} neurons", p, j / kr, w));
    }
    pos[j] = p;
  }
  if (static_cast<size_t>(end - in) != batch * kr * vb)
    fail(fmt::format("{} value bytes follow the positions, expected {} ({} bytes each)", end - in, batch * kr * vb, vb));
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
  payload_uncompressed_ += (parts - 1) * b * local.cols() * sizeof(float);
  gathered_.resize(b, width_);
  if (!compress_) {
    const auto counts = block_counts(b);
    group.all_gatherv(local.span(), exchange_.span(), counts).wait();
    payload_sent_ += (parts - 1) * local.size() * sizeof(float);
    // The gathered buffer holds each rank's B x w_r block in turn; interleave them into B x H.
    const auto offsets = displacements(counts);
    for (int r = 0; r < parts; ++r) {
      const size_t w = bounds_[r + 1] - bounds_[r];
      for (size_t i = 0; i < b; ++i) std::copy_n(exchange_.data() + offsets[r] + i * w, w, gathered_.row(i) + bounds_[r]);
    }
    return gathered_;
  }
  select_top_k(local);
  const size_t k = kept_[me], vb = value_bytes(options_.wire);
  message_.clear();
  if (has_positions(me)) write_positions(positions_[me], k);
  const size_t values_at = message_.size();
  message_.resize(values_at + b * k * vb);
  std::byte* out = message_.data() + values_at;
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < k; ++j, out += vb) write_value(options_.wire, local.at(i, positions_[me][i * k + j]), out);
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(message_, all).wait();
  payload_sent_ += (parts - 1) * message_.size();
  gathered_.zero();
  for (int r = 0; r < parts; ++r) {  // every rank decodes every message, its own included: one result
    const std::byte* in = read_positions(r, all[r], b);
    const size_t kr = kept_[r];
    const auto& pos = positions_[r];
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < kr; ++j, in += vb) gathered_.at(i, bounds_[r] + pos[i * kr + j]) = read_value(options_.wire, in);
  }
  return gathered_;
}

const Tensor& BoundaryExchange::reduce_scatter(const Tensor& partial) {
  Communicator& group = *placement_.group;
  const int me = placement_.rank(), parts = placement_.parts();
  const size_t b = partial.rows(), mine = bounds_[me + 1] - bounds_[me];
  FRUGAL_CHECK(partial.cols() == width_, fmt::format("model-parallel exchange: the gradient has {} columns, expected {}",
                                                     partial.cols(), width_));
  payload_uncompressed_ += b * (width_ - mine) * sizeof(float);
  slice_.resize(b, mine);
  if (!compress_) {
    const auto counts = block_counts(b);
    const auto offsets = displacements(counts);
    for (int r = 0; r < parts; ++r) {
      const size_t w = bounds_[r + 1] - bounds_[r];
      for (size_t i = 0; i < b; ++i) std::copy_n(partial.row(i) + bounds_[r], w, exchange_.data() + offsets[r] + i * w);
    }
    group.reduce_scatterv(exchange_.span(), slice_.span(), counts).wait();
    payload_sent_ += b * (width_ - mine) * sizeof(float);
    return slice_;
  }
  // Each peer gets our partial gradient at its kept positions, in the order it sent them.
  const size_t vb = value_bytes(options_.wire);
  std::vector<Work> sends;
  for (int r = 0; r < parts; ++r) {
    if (r == me) continue;
    const size_t kr = kept_[r];
    message_.resize(b * kr * vb);
    std::byte* out = message_.data();
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < kr; ++j, out += vb)
        write_value(options_.wire, partial.at(i, bounds_[r] + positions_[r][i * kr + j]), out);
    sends.push_back(group.send(r, tag_, message_));  // send copies the bytes
    payload_sent_ += message_.size();
  }
  // Sum the contributions in rank order (ours unrounded: it never travels), so the result does
  // not depend on arrival order.
  const size_t k = kept_[me];
  const auto& pos = positions_[me];
  slice_.zero();
  std::vector<std::byte> received;
  for (int r = 0; r < parts; ++r) {
    if (r == me) {
      for (size_t i = 0; i < b; ++i)
        for (size_t j = 0; j < k; ++j) slice_.at(i, pos[i * k + j]) += partial.at(i, bounds_[me] + pos[i * k + j]);
      continue;
    }
    group.recv(r, tag_, received).wait();
    FRUGAL_CHECK(received.size() == b * k * vb,
                 fmt::format("model-parallel exchange: rank {} sent {} bytes of gradients, expected {} ({} samples x {} "
                             "kept x {} bytes)",
                             r, received.size(), b * k * vb, b, k, vb));
    const std::byte* in = received.data();
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < k; ++j, in += vb) slice_.at(i, pos[i * k + j]) += read_value(options_.wire, in);
  }
  for (Work& w : sends) w.wait();
  return slice_;
}

const Tensor& BoundaryExchange::own_slice(const Tensor& full) {
  const int me = placement_.rank();
  const size_t b = full.rows(), mine = bounds_[me + 1] - bounds_[me];
  slice_.resize(b, mine);
  if (!compress_ || !active(placement_)) {
    for (size_t i = 0; i < b; ++i) std::copy_n(full.row(i) + bounds_[me], mine, slice_.row(i));
    return slice_;
  }
  const size_t k = kept_[me];
  const auto& pos = positions_[me];
  slice_.zero();
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < k; ++j) slice_.at(i, pos[i * k + j]) = full.at(i, bounds_[me] + pos[i * k + j]);
  return slice_;
}

}  // namespace frugal::comm
