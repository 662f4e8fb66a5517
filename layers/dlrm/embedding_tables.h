// EmbeddingTables: one embedding table per categorical field (a Parameter "embedding.C<f>" of
// rows(f) x dim), looked up by the rows an IdMap gives. A sample has one id per field (Criteo's
// format), so a field's pooled vector is its row. Gradients are row-sparse: only the rows the
// batch used, summed over the samples that used them, so lazy Adam touches those rows alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/parameter.h"
#include "core/tensor.h"

namespace frugal::layers {

class EmbeddingTables {
 public:
  // rows[f]: rows of field f's table. Initialized as DLRM's reference does, U(-1/sqrt(rows),
  // 1/sqrt(rows)), each row from its own stream (a row's values do not depend on the others).
  EmbeddingTables(std::span<const size_t> rows, size_t dim, uint64_t seed);

  size_t num_fields() const { return tables_.size(); }
  size_t dim() const { return dim_; }
  size_t num_parameters() const;
  std::vector<Parameter*> parameters();

  // out (B x num_fields * dim): field f's vector of sample i at columns [f * dim, (f + 1) * dim).
  // rows: B x num_fields, as IdMap::map gives them; each must be below its table's rows.
  const Tensor& forward(std::span<const uint32_t> rows, size_t batch);
  // grad_out: dLoss/dOut (B x num_fields * dim) of the last forward. Fills each table's RowGrad.
  void backward(const Tensor& grad_out);

 private:
  size_t dim_;
  std::vector<Parameter> tables_;
  std::vector<uint32_t> rows_;  // the last forward's
  size_t batch_ = 0;
  Tensor out_;
  std::vector<std::pair<uint32_t, uint32_t>> order_;  // (row, sample), sorted: the backward's grouping
};

}  // namespace frugal::layers
