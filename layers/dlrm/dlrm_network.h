// DlrmNetwork: the DLRM click-through model (Naumov et al. 2019). Dense features go through the
// bottom MLP (ReLU layers, the last of width `dim`); each categorical field's id picks a row of
// its embedding table (IdMap, EmbeddingTables); DotInteraction concatenates the bottom vector
// with the dot products of every pair of the 1 + num_fields vectors; the top MLP (ReLU layers,
// then one linear output) gives the click logit, and the loss is the logistic loss. Every layer
// computes on the layers' Backend (Dense through oneDNN on the CPU).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "layers/dense.h"
#include "layers/dlrm/ctr_view.h"
#include "layers/dlrm/dot_interaction.h"
#include "layers/dlrm/embedding_tables.h"
#include "layers/dlrm/table_exchange.h"

namespace frugal {
class Backend;
}

namespace frugal::layers {

struct DlrmOptions {
  size_t num_dense = 13;
  std::vector<EmbeddingField> fields;  // per categorical field: its tables (embedding_fields(IdMap))
  size_t lookups = 1;                  // rows per field in a lookup (IdMap::lookups())
  size_t dim = 16;                  // embedding dimension, also the bottom MLP's output width
  std::vector<size_t> bottom = {64};   // hidden widths of the bottom MLP before its dim-wide output
  std::vector<size_t> top = {64, 32};  // hidden widths of the top MLP before its 1-wide output
  uint64_t seed = 1;
  // The group the tables are sliced over by rows (DES, layers/dlrm/table_exchange.h): each rank
  // trains on its own samples, the MLPs are replicated and their gradients summed over the group.
  // Null or one rank: everything on this rank.
  comm::Communicator* group = nullptr;
  TableMode tables = TableMode::ps;  // how the group shares the tables (layers/dlrm/table_exchange.h)
  void validate() const;
};

class DlrmNetwork {
 public:
  explicit DlrmNetwork(const DlrmOptions& options);
  const DlrmOptions& options() const { return options_; }

  // The summed logistic loss of the batch; with `train`, also every parameter's gradient of the
  // mean loss. rows: the batch's embedding rows (IdMap::map). With a group: collective, the batch is
  // this rank's part of the group's (any size, 0 too), and the gradients are this rank's share of
  // the mean over the group's whole batch: a sliced table's (ps, des) are its owned rows' whole
  // gradient; the MLPs' and replicated tables' are summed over the group by the trainer
  // (train/dlrm_trainer.h: every replica sum is comm/'s ReplicaReducer).
  double forward_backward(const CtrView& batch, std::span<const uint32_t> rows, bool train);
  // Click probabilities of the batch (collective with a group).
  void predict(const CtrView& batch, std::span<const uint32_t> rows, std::vector<float>& probabilities);

  std::vector<Parameter*> parameters();
  // The parameters whose gradients the group must sum after forward_backward: the MLPs', and the
  // tables' when TableMode::replicated (empty without a group).
  std::vector<Parameter*> replicated_dense_parameters();
  std::vector<Parameter*> replicated_table_parameters();
  size_t num_parameters();
  size_t embedding_parameters() const { return tables_.num_parameters(); }
  void set_backend(Backend* backend);
  std::string describe() const;

 private:
  const Tensor& forward(const CtrView& batch, std::span<const uint32_t> rows);

  DlrmOptions options_;
  EmbeddingTables tables_;
  DotInteraction interaction_;
  std::vector<std::unique_ptr<Dense>> bottom_, top_;
  std::unique_ptr<TableExchange> exchange_;  // with a group of more than one rank
  Tensor dense_in_, grad_logits_, grad_bottom_, grad_embeddings_;
  std::vector<const Tensor*> bottom_in_, top_in_;  // each Dense layer's input of the last forward
  const Tensor* logits_ = nullptr;
};

}  // namespace frugal::layers
