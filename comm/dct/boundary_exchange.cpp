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

size_t BoundaryExchange::index_bytes(int rank) const {
  // A slice kept whole needs no positions.
  if (kept_[rank] == bounds_[rank + 1] - bounds_[rank]) return 0;
  return wide_indices_ ? 4 : 2;
}

void BoundaryExchange::check_message(int from, const std::vector<std::byte>& bytes, size_t batch) const {
  const size_t entry = index_bytes(from) + value_bytes(options_.wire);
  FRUGAL_CHECK(bytes.size() == batch * kept_[from] * entry,
               fmt::format("model-parallel exchange: rank {} sent {} bytes of activations, expected {} ({} samples x {} "
                           "kept x {} bytes): the ranks disagree on the batch or on MpCompression::keep",
                           from, bytes.size(), batch * kept_[from] * entry, batch, kept_[from], entry));
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
  message_.resize(b * k * (index_bytes(me) + vb));
  std::byte* out = message_.data();
  for (const uint32_t p : positions_[me]) {
    if (index_bytes(me) == 0) break;
    const uint16_t narrow = static_cast<uint16_t>(p);
    std::memcpy(out, wide_indices_ ? static_cast<const void*>(&p) : &narrow, index_bytes(me));
    out += index_bytes(me);
  }
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < k; ++j, out += vb) write_value(options_.wire, local.at(i, positions_[me][i * k + j]), out);
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(message_, all).wait();
  payload_sent_ += (parts - 1) * message_.size();
  gathered_.zero();
  for (int r = 0; r < parts; ++r) {  // every rank decodes every message, its own included: one result
    check_message(r, all[r], b);
    const size_t kr = kept_[r], w = bounds_[r + 1] - bounds_[r];
    auto& pos = positions_[r];
    pos.resize(b * kr);
    const std::byte* in = all[r].data();
    for (size_t j = 0; j < b * kr; ++j, in += index_bytes(r)) {
      uint32_t p = static_cast<uint32_t>(j % kr);
      if (index_bytes(r) == 0) {
        // kept whole: position j of the sample
      } else if (wide_indices_) {
        std::memcpy(&p, in, 4);
      } else {
        uint16_t narrow;
        std::memcpy(&narrow, in, 2);
        p = narrow;
      }
      FRUGAL_CHECK(p < w && (j % kr == 0 || p > pos[j - 1]),
                   fmt::format("model-parallel exchange: rank {} sent position {} for sample {}, not ascending within "
                               "its slice of {} neurons",
                               r, p, j / kr, w));
      pos[j] = p;
    }
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
