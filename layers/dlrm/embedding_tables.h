// EmbeddingTables: the embedding tables of the categorical fields. Field f has one or two tables
// (IdMap: full/hash one, freq-double/qr two); a sample's lookup gives a row per table (kNoRow: that
// table is not used for it), and the field's vector is the sum of those rows, or for qr their
// element-wise product. A sample has one id per field (Criteo's format), so that vector is the
// field's pooled vector. Gradients are row-sparse: only the rows the batch used, summed over the
// samples that used them, so lazy Adam touches those rows alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/parameter.h"
#include "core/tensor.h"
#include "layers/dlrm/id_map.h"

namespace frugal::layers {

struct EmbeddingField {
  std::vector<size_t> tables;  // rows of each of the field's tables (1 or 2)
  Combine combine = Combine::sum;
};
// The tables an IdMap's rows index.
std::vector<EmbeddingField> embedding_fields(const IdMap& ids);

class EmbeddingTables {
 public:
  // `lookups`: rows per (sample, field) in forward()'s input (IdMap::lookups()). Tables start as
  // DLRM's reference does, U(-1/sqrt(rows), 1/sqrt(rows)), each row from its own stream; a qr
  // field's first (quotient) table starts at 1 + U(-0.01, 0.01), so that the product starts as
  // the remainder row and learns a per-quotient scale.
  EmbeddingTables(std::span<const EmbeddingField> fields, size_t lookups, size_t dim, uint64_t seed);

  size_t num_fields() const { return fields_.size(); }
  size_t dim() const { return dim_; }
  size_t lookups() const { return lookups_; }
  size_t num_parameters() const;
  std::vector<Parameter*> parameters();

  // out (B x num_fields * dim): field f's vector of sample i at columns [f * dim, (f + 1) * dim).
  // rows: B x num_fields x lookups, as IdMap::map gives them; each below its table's rows.
  const Tensor& forward(std::span<const uint32_t> rows, size_t batch);
  // grad_out: dLoss/dOut (B x num_fields * dim) of the last forward. Fills each table's RowGrad.
  void backward(const Tensor& grad_out);

 private:
  // Table t's gradient from (row, sample, factor-table) entries: sum over samples of grad_out's
  // field block, times the other table's row for products.
  void table_backward(size_t field, size_t slot, const Tensor& grad_out);

  size_t dim_, lookups_;
  std::vector<EmbeddingField> fields_;
  std::vector<std::vector<size_t>> table_of_;  // [field][slot] -> index into tables_
  std::vector<Parameter> tables_;
  std::vector<uint32_t> rows_;  // the last forward's
  size_t batch_ = 0;
  Tensor out_;
  std::vector<std::pair<uint32_t, uint32_t>> order_;  // (row, sample), sorted: the backward's grouping
};

}  // namespace frugal::layers
