// PsExchange (`--table-exchange ps`, layers/dlrm/table_exchange.h): tables sliced by rows over the
// group as for DES, but a rank pulls the rows its own samples use from their owners, computes with
// them, and pushes those rows' gradients back; each owner sums the pushes in rank order. Ids and
// rows cross the network in both directions, which is what DES's partial results save.
#pragma once

#include <vector>

#include "layers/dlrm/table_exchange.h"

namespace frugal::layers {

class PsExchange : public TableExchange {
 public:
  PsExchange(comm::Communicator& group, EmbeddingTables& tables);
  const Tensor& forward(std::span<const uint32_t> rows, size_t n) override;
  size_t group_samples() const override { return total_; }
  void backward(const Tensor& grad_out) override;

 private:
  // A table is one (field, slot) pair, numbered field-major.
  struct Table {
    size_t field = 0, slot = 0;
    std::vector<size_t> bounds;       // owners' row ranges (slice_bounds over the group)
    std::vector<uint32_t> used;       // rows this rank's samples use, sorted
    Tensor values;                    // used.size() x dim: their vectors (pulled or own)
    std::vector<std::vector<uint32_t>> requested;  // per rank: the owned rows it pulled (its order)
  };
  int owner(const Table& t, uint32_t row) const;

  comm::Communicator& group_;
  EmbeddingTables& tables_;
  std::vector<Table> tables_info_;
  std::vector<uint32_t> rows_;
  size_t n_ = 0, total_ = 0;
  Tensor slots_, grad_slots_;
};

}  // namespace frugal::layers
