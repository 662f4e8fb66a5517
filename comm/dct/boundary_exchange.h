// BoundaryExchange: the model-parallel half of Dynamic Communication Thresholding (DCT-MP) at one
// sliced-layer boundary. A layer sliced by neurons over a model-parallel group produces B x w_r
// activations on rank r; the next layer needs all B x H of them.
//
// Forward, each sample keeps only the top-k activations (by magnitude) of each rank's slice and
// only those travel, as (position, value) with positions gap-coded in one byte each (an escape for
// gaps of 255 or more); the others are zero on every rank, as if a mask were part of
// the network. Backward, the next layer's partial input gradients are summed over the group at the
// kept positions only (the mask's gradient is zero elsewhere), so the backward message needs no
// indices: every rank already knows the kept positions from the forward pass. Values may travel as
// bf16 or f16.
//
// With every position kept and f32 values, the exchange is exactly the uncompressed one (an
// all-gather forward, a reduce-scatter backward).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/codec.h"
#include "core/exchange.h"
#include "core/placement.h"
#include "core/tensor.h"

namespace frugal::comm {


class BoundaryExchange : public ActivationExchange {
 public:
  // `placement`: the producing layer's (sliced over the model group); `width`: its whole output
  // width H; `tag`: distinguishes this boundary's point-to-point messages from other boundaries'.
  BoundaryExchange(const Placement& placement, size_t width, const MpCompression& options, int tag);

  // Sets the kept counts of the warm-up schedule at training step `step` (same on every rank).
  void set_step(uint64_t step) override;
  // local (B x w_me) -> the whole masked layer output (B x H), identical on every rank.
  const Tensor& gather(const Tensor& local) override;
  // partial (B x H): this rank's share of dLoss/dOutput of the whole layer -> the group's sum on
  // this rank's slice (B x w_me), zero at positions the forward pass dropped.
  const Tensor& reduce_scatter(const Tensor& partial) override;
  // full (B x H): dLoss/dOutput already summed (a replicated consumer) -> this rank's slice,
  // masked like reduce_scatter's result.
  const Tensor& own_slice(const Tensor& full) override;

  // Cumulative payload of this rank: bytes of the messages it handed to the communicator times
  // the peers each goes to, and what the uncompressed f32 exchange would have handed over.
  uint64_t payload_sent() const override { return payload_sent_; }
  uint64_t payload_uncompressed() const override { return payload_uncompressed_; }

 private:
  void select_top_k(const Tensor& local);
  bool has_positions(int rank) const;
  // Appends `positions` (per_sample per sample, ascending within each) to message_, gap-coded.
  void write_positions(std::span<const uint32_t> positions, size_t per_sample);
  // Decodes rank `from`'s positions into positions_[from]; returns where its values start. Fails,
  // naming the rank, on a message that is truncated, not ascending or of the wrong length.
  const std::byte* read_positions(int from, const std::vector<std::byte>& bytes, size_t batch);
  static constexpr uint8_t kEscape = 255;
  // Each rank's B x w_r block size in the plain exchange; sizes exchange_ to hold them all.
  std::vector<size_t> block_counts(size_t batch);

  Placement placement_;
  size_t width_;
  MpCompression options_;
  int tag_;
  std::vector<size_t> bounds_, kept_;  // slice bounds; positions kept per sample, per rank
  bool wide_indices_;                  // a slice wider than 65536: escaped positions take 4 bytes, else 2
  bool compress_ = false;              // top-k or a narrow wire type this step; else the plain exchange
  // kept positions (slice-relative, ascending per sample) of every rank's slice, B x kept_[r]
  std::vector<std::vector<uint32_t>> positions_;
  Tensor gathered_, exchange_, slice_;
  std::vector<std::byte> message_;
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0;
};

}  // namespace frugal::comm
