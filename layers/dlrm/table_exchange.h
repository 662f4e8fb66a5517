// TableExchange: how ranks that each train on their own samples share the embedding tables
// (DlrmOptions::tables). Three ways, measured against each other in bench/recsys:
//  - des (DesExchange; DES, SIGIR 2020): rows sliced over the group; the ranks
//    all-gather their samples' rows (ids cross the network once), each computes the slot vectors of
//    every rank's samples from the rows it owns (zero elsewhere) and a reduce-scatter hands every
//    rank its own samples' complete slots: partial results travel, weights never. Backward: the
//    slot gradients are all-gathered and each owner accumulates its rows over the group's samples.
//  - ps (PsExchange, the default): rows sliced the same way, but each rank pulls the rows its samples
//    use from their owners and pushes their gradients back (a parameter server in all but name).
//    With one id per field (Criteo's format) a DES partial result is a whole row per sample and
//    field, while a pull serves each row once per batch: ps sends fewer bytes (1,680 against 3,876
//    per sample on 4 ranks) and trains 2x faster on 100 Mbit links; DES pays off when fields
//    are multi-hot and pooled.
//  - replicated (ReplicatedExchange, `--parallel data`): every rank holds every table, and every
//    table's gradient is summed over the ranks in full, every step (the Horovod scheme).
// In all three the group trains as one rank would on the group's whole batch: des exactly for the
// tables (one owner per slot, sums in global sample order), ps and replicated up to the order of
// float sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/communicator.h"
#include "core/tensor.h"
#include "layers/dlrm/embedding_tables.h"

namespace frugal::layers {

enum class TableMode { des, ps, replicated };
std::string_view to_string(TableMode mode);  // "des", "ps", "replicated"

class TableExchange {
 public:
  virtual ~TableExchange() = default;
  // Collective. Field vectors (n x num_fields * dim) of this rank's n samples; rows: n x num_fields
  // x lookups (IdMap::map).
  virtual const Tensor& forward(std::span<const uint32_t> rows, size_t n) = 0;
  // Samples of the last forward over the whole group.
  virtual size_t group_samples() const = 0;
  // Collective. grad_out: dLoss/d(field vectors) of this rank's samples of the last forward; fills
  // this rank's rows' RowGrads with the group's sums.
  virtual void backward(const Tensor& grad_out) = 0;
};

// The exchange of `mode` over `group` for `tables`, which must be sliced over the group (des, ps)
// or whole on every rank (replicated).
std::unique_ptr<TableExchange> make_table_exchange(TableMode mode, comm::Communicator& group, EmbeddingTables& tables);

class DesExchange : public TableExchange {
 public:
  DesExchange(comm::Communicator& group, EmbeddingTables& tables) : group_(group), tables_(tables) {}
  const Tensor& forward(std::span<const uint32_t> rows, size_t n) override;
  size_t group_samples() const override { return all_rows_.size() / row_stride(); }
  void backward(const Tensor& grad_out) override;

 private:
  size_t row_stride() const { return tables_.num_fields() * tables_.lookups(); }

  comm::Communicator& group_;
  EmbeddingTables& tables_;
  std::vector<uint32_t> all_rows_;  // every rank's samples' rows, in rank order
  std::vector<size_t> counts_;      // floats of slot vectors per rank
  Tensor all_slots_, own_slots_, grad_slots_, all_grad_slots_;
};

// The number of samples over the group (collective; an exact integer sum).
size_t group_count(comm::Communicator& group, size_t mine);

}  // namespace frugal::layers
