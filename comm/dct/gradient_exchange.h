// GradientExchange: DCT-DP, the data-parallel half of Dynamic Communication Thresholding. Each
// replica thresholds its row-sparse gradient of one parameter (comm/dct/thresholder.h, error feedback
// included), and the replicas exchange what they sent so every one ends with the same sum.
//
// Each exchange takes one of two paths, decided identically on every rank from a tiny all-reduce
// of the encoded message sizes:
//  - sparse: all_gather_bytes of the encoded (index, value) messages, merged by index. Costs
//    O(entries sent), never O(parameter): an input layer of 100M+ entries with a few hundred
//    touched rows stays cheap.
//  - dense fallback: when the messages of all ranks together outweigh what a ring all-reduce of
//    the whole parameter moves (2 * rows * cols * 4 bytes), one all_reduce of the dense parameter
//    plus a per-row "sent" flag.
// Either way the result is bitwise identical on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "core/communicator.h"
#include "comm/dct/thresholder.h"
#include "core/tensor.h"

namespace frugal::comm {


class GradientExchange {
 public:
  // `name` only labels errors (the parameter's name).
  GradientExchange(const DpCompression& options, size_t rows, size_t cols, std::string name = {});

  // rows: sorted unique touched rows; values: rows.size() x cols (an empty `rows` may come with a
  // 0 x anything tensor). On return both hold the SUM over all replicas of what each replica sent:
  // rows = sorted union of the rows in which any replica sent at least one entry; values = those
  // rows, zero where nobody sent. Sums run in rank order. Collective: every rank of `group` calls
  // it for the same parameter in the same order.
  void exchange(Communicator& group, std::vector<uint32_t>& rows, Tensor& values);

  // exchange() in phases, so that a reducer can fuse the small collectives of several parameters
  // (ThresholdedReducer: one all-reduce of every parameter's totals, one all-gather of the messages):
  //  1. compress(): thresholds this rank's gradient and encodes its message (message()); returns
  //     its size and entry count. On 1 rank it also finishes: rows and values are what it sent.
  //  2. the caller sums every rank's Totals (bitwise the same on every rank) and asks path();
  //  3. none: finish_empty(); dense: exchange_dense() (a collective of its own); sparse: the caller
  //     gathers every rank's message() and hands them, in rank order, to finish_sparse(), which
  //     fails naming the parameter and the rank on a message that does not decode.
  // count_totals_reduce() and count_gather() add what the caller's collectives sent for this
  // parameter to payload_sent().
  struct Totals {
    float bytes = 0, entries = 0;
  };
  enum class Path { none, sparse, dense };
  Totals compress(int ranks, std::vector<uint32_t>& rows, Tensor& values);
  std::span<const std::byte> message() const { return message_; }
  Path path(const Totals& summed) const;
  void finish_empty(std::vector<uint32_t>& rows, Tensor& values) const;
  void exchange_dense(Communicator& group, std::vector<uint32_t>& rows, Tensor& values);
  void finish_sparse(std::span<const std::span<const std::byte>> all, std::vector<uint32_t>& rows, Tensor& values);
  void count_totals_reduce(size_t bytes, int ranks);
  void count_gather(size_t bytes, int ranks);
  // The most bytes one all-gather may move in all (MPI's all_gather_bytes counts in int).
  static constexpr double kMostGathered = 2e9;

  // Cumulative payload accounting for this rank. An all_gather counts its message once per peer;
  // an all-reduce counts what a ring all-reduce sends per rank, 2 * (P-1) / P * bytes, the same
  // model as payload_uncompressed, so the dense fallback reads as ~1x, not as P/2 times worse.
  uint64_t payload_sent() const { return payload_sent_; }
  // The dense ring all-reduce of the whole parameter: 2 * (P-1) / P * rows * cols * 4 per exchange.
  uint64_t payload_uncompressed() const { return payload_uncompressed_; }
  // ReplicaReducer::payload_touched: this rank's touched entries of each step in a ring all-reduce.
  uint64_t payload_touched() const { return payload_touched_; }
  uint64_t dense_fallbacks() const { return dense_fallbacks_; }
  uint64_t exchanges() const { return exchanges_; }
  const Thresholder& thresholder() const { return thresholder_; }
  Thresholder& thresholder() { return thresholder_; }  // checkpoints restore its state

 private:
  // Sorted flat (index, value) pairs -> rows and a rows.size() x cols tensor.
  void to_rows(std::span<const uint32_t> indices, std::span<const float> sums,
               std::vector<uint32_t>& rows, Tensor& values) const;

  DpCompression options_;
  size_t rows_, cols_;
  std::string name_;
  Thresholder thresholder_;
  std::vector<uint32_t> indices_;  // this rank's message, reused between steps
  std::vector<float> sent_;
  std::vector<std::byte> message_;  // this rank's encoded message of the current step
  std::vector<SparseVector> parts_;  // the ranks' decoded messages, then their merge (reused)
  std::vector<uint32_t> merged_indices_[2];
  std::vector<float> merged_sums_[2];
  std::vector<float> dense_;  // the fallback's buffer; allocated only once the fallback runs
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0, payload_touched_ = 0, dense_fallbacks_ = 0, exchanges_ = 0;
};

}  // namespace frugal::comm
