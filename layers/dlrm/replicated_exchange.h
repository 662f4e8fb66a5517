// ReplicatedExchange (`--parallel data`, layers/dlrm/table_exchange.h): every rank holds every
// table whole and every table's gradient is summed over the ranks in full, every step (Horovod's
// dense all-reduce), the baseline sliced tables are measured against. The sum is a ReplicaReducer's
// (DlrmNetwork's table reducer: comm/, where every replica sum lives), in dense mode listing the rows
// whose summed gradient is not zero, so lazy Adam updates the rows some rank used, as one rank on
// the whole batch would.
#pragma once

#include <vector>

#include "layers/dlrm/table_exchange.h"

namespace frugal::layers {

class ReplicatedExchange : public TableExchange {
 public:
  ReplicatedExchange(comm::Communicator& group, EmbeddingTables& tables) : group_(group), tables_(tables) {}
  const Tensor& forward(std::span<const uint32_t> rows, size_t n) override;
  size_t group_samples() const override { return total_; }
  void backward(const Tensor& grad_out) override;

 private:
  comm::Communicator& group_;
  EmbeddingTables& tables_;
  size_t total_ = 0;
};

}  // namespace frugal::layers
