// BoundaryExchange: the model-parallel half of Dynamic Communication Thresholding (DCT-MP) at one
// sliced-layer boundary. A layer sliced by neurons over a model-parallel group produces B x w_r
// activations on rank r; the next layer needs all B x H of them.
//
// Forward, each sample keeps only the top-k activations (by magnitude) of each rank's slice and
// only those travel, as (position, value) with positions gap-coded in one byte each (an escape for
// gaps of 255 or more); the others are zero on every rank, as if a mask were part of
// the network. With an adaptive k (MpCompression::mass < 1) each sample keeps the fewest of its
// top-k whose magnitudes cover that fraction of its slice's L1 mass, and its count travels first. Backward, the next layer's partial input gradients are summed over the group at the
// kept positions only (the mask's gradient is zero elsewhere), so the backward message needs no
// indices: every rank already knows the kept positions from the forward pass. Values may travel as
// bf16, f16 or scaled int8 (one byte each and a bf16 scale per sample; activations round to
// nearest, their gradients stochastically).
//
// With every position kept and f32 values, the exchange is exactly the uncompressed one (an
// all-gather forward, a reduce-scatter backward).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "comm/codec.h"
#include "comm/exchange.h"
#include "core/placement.h"
#include "core/tensor.h"
#include "core/work.h"

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
  // The exact exchange gathers in row parts: one part's all-gather in flight at a time (a part's
  // start waits for the one before), each B_part x w_r block then interleaved into B x H.
  bool gathers_in_parts() const override;
  void gather_rows(const Tensor& local, size_t first, size_t count) override;
  const Tensor& finish_gather(const Tensor& local) override;
  void abandon_gather() override;
  // Waits for collectives still in flight (a failed step's), which write into this object.
  ~BoundaryExchange() override;
  // partial (B x H): this rank's share of dLoss/dOutput of the whole layer -> the group's sum on
  // this rank's slice (B x w_me), zero at positions the forward pass dropped.
  const Tensor& reduce_scatter(const Tensor& partial) override;
  // The exact (uncompressed) exchange's reduce-scatter in flight between the two; DCT-MP's
  // compressed one runs whole at the start.
  void start_reduce_scatter(const Tensor& partial) override;
  const Tensor& finish_reduce_scatter() override;
  // full (B x H): dLoss/dOutput already summed (a replicated consumer) -> this rank's slice,
  // masked like reduce_scatter's result.
  const Tensor& own_slice(const Tensor& full) override;

  // Cumulative payload of this rank: bytes of the messages it handed to the communicator times
  // the peers each goes to, and what the uncompressed f32 exchange would have handed over.
  uint64_t payload_sent() const override { return payload_sent_; }
  uint64_t payload_uncompressed() const override { return payload_uncompressed_; }

 private:
  // The exact exchange's blocks of `partial` into exchange_, rank by rank; their sizes.
  std::vector<size_t> pack_blocks(const Tensor& partial);
  void select_top_k(const Tensor& local);
  bool has_positions(int rank) const;
  // Adaptive k (MpCompression::mass < 1): each sample keeps its own count, which travels with it.
  bool adaptive() const { return options_.mass < 1.0; }
  // Appends one count or position gap to message_: a byte below 255, else the escape and the value.
  void write_index(uint32_t value);
  // Appends rank `rank`'s kept positions (ascending per sample) to message_, gap-coded.
  void write_positions(int rank);
  // offsets_[rank] of a fixed count per sample (kept_[rank]).
  void fixed_offsets(int rank, size_t batch);
  // Decodes rank `from`'s positions into positions_[from]; returns where its values start. Fails,
  // naming the rank, on a message that is truncated, not ascending or of the wrong length.
  const std::byte* read_positions(int from, const std::vector<std::byte>& bytes, size_t batch);
  static constexpr uint8_t kEscape = 255;
  // One sample's n values on the wire: their bytes, and writing / reading them (i8: with the
  // row's scale; `stochastic_key` 0 rounds to nearest, comm/dct/scaled_int8.h).
  size_t row_bytes(size_t n) const;
  // The value bytes of rank `rank`'s kept activations this step (every sample's row_bytes).
  size_t values_bytes(int rank) const;
  void put_row(std::span<const float> values, std::byte* out, uint32_t stochastic_key = 0) const;
  void get_row(const std::byte* in, std::span<float> values) const;
  // The stochastic rounding of the gradient this rank sends rank `to` for `sample` this step.
  uint32_t gradient_rounding_key(int to, size_t sample) const;
  // Each rank's B x w_r block size in the plain exchange; block_counts also sizes exchange_ to hold
  // them all.
  std::vector<size_t> block_sizes(size_t batch) const;
  std::vector<size_t> block_counts(size_t batch);

  Placement placement_;
  size_t width_;
  MpCompression options_;
  int tag_;
  std::vector<size_t> bounds_, kept_;  // slice bounds; positions kept per sample, per rank
  bool wide_indices_;                  // a slice wider than 65536: escaped positions take 4 bytes, else 2
  bool compress_ = false;              // top-k or a narrow wire type this step; else the plain exchange
  // kept positions (slice-relative, ascending per sample) of every rank's slice: sample i's are
  // positions_[r][offsets_[r][i] .. offsets_[r][i + 1]) (kept_[r] each, or fewer when adaptive)
  std::vector<std::vector<uint32_t>> positions_;
  std::vector<std::vector<size_t>> offsets_;
  Tensor gathered_, exchange_, slice_;
  std::optional<Work> scatter_;  // start_reduce_scatter's collective, until the finish
  std::optional<Work> gather_;   // gather_rows' collective in flight, until the next part or the finish
  size_t gather_first_ = 0, gather_count_ = 0;  // its rows
  // Waits for gather_rows' part in flight and interleaves its blocks into gathered_.
  void land_gathered_part();
  // Fails unless no gather_rows part is in flight (every other exchange reuses its buffers).
  void check_no_gather_in_flight(const char* what) const;
  std::vector<std::byte> message_;
  std::vector<float> row_;             // one sample's kept values
  // MpCompression::error_feedback: per peer r, what this rank's share to r did not deliver
  // (rows of the batch x r's slice width; grown to the largest batch seen).
  std::vector<Tensor> feedback_;
  uint64_t step_ = UINT64_MAX;         // of set_step: keys the gradients' stochastic rounding
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0;
};

}  // namespace frugal::comm
