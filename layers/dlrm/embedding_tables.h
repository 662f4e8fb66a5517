// EmbeddingTables: the embedding tables of the categorical fields. Field f has one or two tables
// (IdMap: full/hash one, freq-double/qr two); a sample's lookup gives a row per table, its "slots"
// (kNoRow: that table is not used for it), and the field's vector is the sum of the slots' rows,
// or for qr their element-wise product. A sample has one id per field (Criteo's format), so that
// vector is the field's pooled vector.
//
// Sliced over a model group (DES, Distributed Equivalent Substitution): rank r of R keeps rows
// [slice_bounds(rows, R)[r], [r+1]) of every table, and the tables' work splits in three:
//  1. gather_owned: a slot vector per (sample, field, slot) from the rows this rank owns, zero for
//     the rest: summed over the ranks (the exchange, layers/dlrm/sparse_exchange.h), every slot is
//     complete, and exactly so (each row has one owner; the others add zeros);
//  2. combine / combine_backward: field vectors from complete slots, and back;
//  3. accumulate: row gradients of the owned rows from slot gradients.
// forward()/backward() are 1-3 on one rank. Gradients are row-sparse: only the rows the batch
// used, summed over the samples that used them in sample order, so lazy Adam touches those alone.
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
  // `lookups`: slots per (sample, field) (IdMap::lookups()). Rows start as DLRM's reference has
  // them, U(-1/sqrt(rows), 1/sqrt(rows)); a qr field's first (quotient) table at
  // 1 + U(-0.01, 0.01), so the product starts as the remainder row and learns a per-quotient scale.
  // Each row comes from its own stream: a slice holds exactly the unsliced tables' values.
  EmbeddingTables(std::span<const EmbeddingField> fields, size_t lookups, size_t dim, uint64_t seed, int rank = 0,
                  int ranks = 1);

  size_t num_fields() const { return fields_.size(); }
  size_t dim() const { return dim_; }
  size_t lookups() const { return lookups_; }
  // Width of a sample's slot vectors (num_fields x lookups x dim).
  size_t slot_width() const { return fields_.size() * lookups_ * dim_; }
  size_t num_parameters() const;  // this rank's rows
  std::vector<Parameter*> parameters();
  // Slot s of field f's table (its Parameter: this rank's rows [offset, offset + rows), of full_rows).
  Parameter& table(size_t field, size_t slot) { return tables_[table_of_[field][slot]]; }
  const Parameter& table(size_t field, size_t slot) const { return tables_[table_of_[field][slot]]; }
  size_t tables_of(size_t field) const { return table_of_[field].size(); }

  // 1. slots (n x slot_width()): the owned rows' vectors, zero elsewhere. rows: n x num_fields x
  //    lookups (IdMap::map), each below its table's rows (all of them, not only the owned).
  void gather_owned(std::span<const uint32_t> rows, size_t n, Tensor& slots) const;
  // 2. Field vectors (n x num_fields * dim) from complete slots; keeps both for combine_backward.
  const Tensor& combine(std::span<const uint32_t> rows, const Tensor& slots);
  void combine_backward(const Tensor& grad_out, Tensor& grad_slots) const;
  // 3. Each owned row's gradient: the sum, in sample order, of its slots' gradients over the n
  //    samples (any rank's). Replaces the tables' RowGrads.
  void accumulate(std::span<const uint32_t> rows, size_t n, const Tensor& grad_slots);

  // 1-3 on one rank (every row owned).
  const Tensor& forward(std::span<const uint32_t> rows, size_t batch);
  void backward(const Tensor& grad_out);

 private:
  void check_rows(std::span<const uint32_t> rows, size_t n) const;

  size_t dim_, lookups_;
  std::vector<EmbeddingField> fields_;
  std::vector<std::vector<size_t>> table_of_;  // [field][slot] -> index into tables_
  std::vector<Parameter> tables_;              // this rank's rows: [offset, offset + value.rows())
  std::vector<uint32_t> rows_;                 // the last combine's
  const Tensor* slots_ = nullptr;
  Tensor own_slots_, grad_slots_, out_;
  std::vector<std::pair<uint32_t, uint32_t>> order_;  // (row, sample), sorted: accumulate's grouping
};

}  // namespace frugal::layers
