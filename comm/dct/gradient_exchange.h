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

  // Cumulative payload accounting for this rank. An all_gather counts its message once per peer;
  // an all-reduce counts what a ring all-reduce sends per rank, 2 * (P-1) / P * bytes, the same
  // model as payload_uncompressed, so the dense fallback reads as ~1x, not as P/2 times worse.
  uint64_t payload_sent() const { return payload_sent_; }
  // The dense ring all-reduce of the whole parameter: 2 * (P-1) / P * rows * cols * 4 per exchange.
  uint64_t payload_uncompressed() const { return payload_uncompressed_; }
  uint64_t dense_fallbacks() const { return dense_fallbacks_; }
  uint64_t exchanges() const { return exchanges_; }
  const Thresholder& thresholder() const { return thresholder_; }
  Thresholder& thresholder() { return thresholder_; }  // checkpoints restore its state

 private:
  void exchange_dense(Communicator& group, std::vector<uint32_t>& rows, Tensor& values);
  void exchange_sparse(Communicator& group, std::span<const std::byte> mine,
                       std::vector<uint32_t>& rows, Tensor& values);
  // Sorted flat (index, value) pairs -> rows and a rows.size() x cols tensor.
  void to_rows(std::span<const uint32_t> indices, std::span<const float> sums,
               std::vector<uint32_t>& rows, Tensor& values) const;

  DpCompression options_;
  size_t rows_, cols_;
  std::string name_;
  Thresholder thresholder_;
  std::vector<uint32_t> indices_;  // this rank's message, reused between steps
  std::vector<float> sent_;
  std::vector<float> dense_;  // the fallback's buffer; allocated only once the fallback runs
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0, dense_fallbacks_ = 0, exchanges_ = 0;
};

}  // namespace frugal::comm
