// The replica reducers (comm/exchange.h's ReplicaReducer): the one place where data-parallel
// replicas sum their gradients. Three ways, one per ReduceMode:
//  - TouchedRowsReducer: the replicas agree on the union of the rows any of them touched, then
//    all-reduce those rows only (exact; O(touched rows) on the wire), every parameter in the same
//    two collectives.
//  - DenseReducer: every parameter in full, every step (the Horovod scheme; the baseline).
//  - ThresholdedReducer: DCT-DP, one GradientExchange (thresholds + error feedback) per parameter,
//    their small collectives fused: one all-reduce of every parameter's message size decides each
//    one's path, and the sparse messages travel in one all-gather (two round trips a step, not two
//    per parameter).
// Sums run in rank order, so every replica ends with the same bits.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/communicator.h"
#include "comm/exchange.h"
#include "core/parameter.h"

namespace frugal::comm {

class GradientExchange;

class TouchedRowsReducer : public ReplicaReducer {
 public:
  // dense: every parameter in full (one all-reduce of all of them), listing every row or, with
  // list_summed_rows, the rows whose sum is not zero.
  TouchedRowsReducer(Communicator& group, std::vector<Parameter*> params, bool dense, bool list_summed_rows = false);
  void reduce() override;
  uint64_t payload_sent() const override { return payload_sent_; }
  uint64_t payload_uncompressed() const override { return payload_uncompressed_; }

 private:
  void reduce_dense();
  // Every parameter at once: one all-gather of their touched row lists, one all-reduce of their
  // unions' rows (two round trips a step, not two per parameter).
  void reduce_touched();

  Communicator& group_;
  std::vector<Parameter*> params_;
  bool dense_, list_summed_rows_;
  std::vector<std::byte> frame_;
  std::vector<std::vector<uint32_t>> unions_;
  std::vector<float> sums_;
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0;
};

class ThresholdedReducer : public ReplicaReducer {
 public:
  // Each replica samples its own tau (its own residual), reproducibly: the seed of parameter i is
  // split by this replica's rank and by i.
  ThresholdedReducer(Communicator& group, std::vector<Parameter*> params, const DpCompression& options);
  ~ThresholdedReducer() override;
  void reduce() override;
  uint64_t payload_sent() const override;
  uint64_t payload_uncompressed() const override;
  uint64_t payload_touched() const override;
  size_t feedback_states() const override { return exchanges_.size(); }
  size_t feedback_size(size_t param) const override;
  ThresholderState feedback_state(size_t param) const override;
  void restore_feedback(size_t param, const ThresholderState& state) override;
  AutoKeep auto_keep(size_t param) const override;

 private:
  // One all-gather of the messages of the parameters `which` (those on the sparse path), then
  // each parameter's merge.
  void gather_sparse(std::span<const size_t> which);

  Communicator& group_;
  std::vector<Parameter*> params_;
  std::vector<std::unique_ptr<GradientExchange>> exchanges_;
  std::vector<std::byte> frame_;
};

// The ReplicaReducer for `options` (ReduceMode::thresholded: DCT-DP with options.dp).
std::unique_ptr<ReplicaReducer> make_replica_reducer(Communicator& group, std::vector<Parameter*> params,
                                                     const ReducerOptions& options);

}  // namespace frugal::comm
