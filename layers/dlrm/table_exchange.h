// TableExchange: DES (Distributed Equivalent Substitution, SIGIR 2020) for embedding tables sliced
// by rows over a group. Every rank trains on its own samples; for the tables:
//  forward:  the ranks all-gather their samples' rows (ids cross the network once), each computes
//            the slot vectors of every rank's samples from the rows it owns (zero elsewhere), and a
//            reduce-scatter hands every rank its own samples' complete slots: partial results
//            travel, weights never;
//  backward: the ranks all-gather their samples' slot gradients, and each owner accumulates its
//            rows' gradients over all of the group's samples.
// Each slot vector has one owner, so the forward sums are exact and the backward's sums run in
// global sample order: the tables train exactly as one rank would on the group's whole batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/communicator.h"
#include "core/tensor.h"
#include "layers/dlrm/embedding_tables.h"

namespace frugal::layers {

class TableExchange {
 public:
  TableExchange(comm::Communicator& group, EmbeddingTables& tables) : group_(group), tables_(tables) {}

  // Collective. Field vectors (n x num_fields * dim) of this rank's n samples; rows: n x num_fields
  // x lookups (IdMap::map).
  const Tensor& forward(std::span<const uint32_t> rows, size_t n);
  // Samples of the last forward over the whole group.
  size_t group_samples() const { return all_rows_.size() / row_stride(); }
  // Collective. grad_out: dLoss/d(field vectors) of this rank's samples; fills the owned rows' RowGrads.
  void backward(const Tensor& grad_out);

 private:
  size_t row_stride() const { return tables_.num_fields() * tables_.lookups(); }

  comm::Communicator& group_;
  EmbeddingTables& tables_;
  std::vector<uint32_t> all_rows_;   // every rank's samples' rows, in rank order
  std::vector<size_t> counts_;       // floats of slot vectors per rank
  Tensor all_slots_, own_slots_, grad_slots_, all_grad_slots_;
};

}  // namespace frugal::layers
