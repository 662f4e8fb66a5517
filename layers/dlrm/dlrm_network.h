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
#include "core/exchange.h"
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
  // DCT-DP on the MLPs' gradients over the group (core/exchange.h's thresholded ReplicaReducer):
  // each rank sends the entries above its threshold, the rest is fed back. Unset: an exact sum.
  std::optional<comm::DpCompression> dp = std::nullopt;
  // What makes the reducers that sum the replicas' gradients (comm/exchange_factory.h's
  // comm_exchanges(): this floor is below comm/, where every replica sum lives): the MLPs' (exact,
  // or DCT-DP with dp) and, with TableMode::replicated, the tables'. Required with a group.
  const comm::ExchangeFactory* exchanges = nullptr;
  void validate() const;
};

class DlrmNetwork {
 public:
  explicit DlrmNetwork(const DlrmOptions& options);
  const DlrmOptions& options() const { return options_; }

  // The summed logistic loss of the batch; with `train`, also every parameter's gradient of the
  // mean loss. rows: the batch's embedding rows (IdMap::map). With a group: collective, the batch is
  // this rank's part of the group's (any size, 0 too), and the gradients are those of the mean
  // over the group's whole batch, the same on every rank (the tables': of the owned rows).
  double forward_backward(const CtrView& batch, std::span<const uint32_t> rows, bool train);
  // Click probabilities of the batch (collective with a group).
  void predict(const CtrView& batch, std::span<const uint32_t> rows, std::vector<float>& probabilities);

  std::vector<Parameter*> parameters();
  size_t num_parameters();
  size_t embedding_parameters() const { return tables_.num_parameters(); }
  void set_backend(Backend* backend);
  // The MLP gradients' payload this rank sent over the group, and what the exact sum would have
  // sent (both 0 without a group); their ratio is DCT-DP's compression.
  uint64_t dp_payload_sent() const;
  uint64_t dp_payload_uncompressed() const;
  std::string describe() const;

 private:
  const Tensor& forward(const CtrView& batch, std::span<const uint32_t> rows);

  DlrmOptions options_;
  EmbeddingTables tables_;
  DotInteraction interaction_;
  std::vector<std::unique_ptr<Dense>> bottom_, top_;
  std::unique_ptr<TableExchange> exchange_;  // with a group of more than one rank
  // With a group: the MLPs' gradients summed (one dense all-reduce, or DCT-DP with
  // DlrmOptions::dp), and with replicated tables theirs (dense, listing the rows some rank used).
  std::unique_ptr<comm::ReplicaReducer> dense_reducer_, table_reducer_;
  Tensor dense_in_, grad_logits_, grad_bottom_, grad_embeddings_;
  std::vector<const Tensor*> bottom_in_, top_in_;  // each Dense layer's input of the last forward
  const Tensor* logits_ = nullptr;
};

}  // namespace frugal::layers
