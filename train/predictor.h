// Predictor: a trained model loaded from a checkpoint directory for inference. It rebuilds the
// network from the manifest's configuration (what `frugal train` records; layers/network_spec.h),
// restores the weights only (no optimizer state, no LSH tables), and returns each point's best
// labels with their logits: over every label (exact), or over the labels that LSH tables built
// from the loaded output rows return (PredictorOptions::inference = Inference::lsh).
//
// The checkpoint may have been saved by any number of ranks: the weights are resliced onto this
// process (no group), or onto `group`, whose ranks then each hold and score a block of the labels;
// their per-rank top-k lists are merged, and every rank gets the same result. With a group, every
// call is collective: each rank passes the same batch.
//
//   frugal::Predictor predictor("ckpt");                      // a `frugal train --checkpoint ckpt` directory
//   auto top = predictor.top_k(batch, 5);                      // top.labels_of(i), top.scores_of(i)
//
// (It lives in layers/ because rebuilding a network needs the layers, which core/ cannot see.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "core/layer.h"
#include "core/placement.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/sparse_batch.h"
#include "train/checkpoint.h"
#include "train/ensemble_ranker.h"
#include "train/served_checkpoint.h"

namespace frugal {
class Model;
}
namespace frugal::comm {
class Communicator;
}

namespace frugal::train {

struct PredictorOptions {
  // Ranks that share the model (each loads and scores its own block of the labels); null or a
  // 1-rank group: this process holds the whole model.
  comm::Communicator* group = nullptr;
  // Builds the network instead of the manifest's configuration, for checkpoints saved through the
  // API (save_checkpoint without a config): add the layers as in training, over `placement`.
  std::function<void(Model&, const Placement&)> build{};
  size_t batch = 512;  // points per forward pass in evaluate()
  // exact: every label is scored; lsh: only the labels that LSH tables over the output rows
  // return for each point (tables built from the loaded weights at the first call).
  Inference inference = Inference::exact;
  size_t inference_candidates = InferenceOptions{}.candidates;  // LSH: labels scored per point at most
  // --infer ensemble: the network's ranking blended with the label centroids and nearest training
  // points that `frugal train` kept next to the checkpoint (DIR/label_centroids.bin,
  // DIR/nearest_points.bin; an error naming the file when one the blend needs is missing).
  std::optional<EnsembleOptions> ensemble{};
  // The training set, when the checkpoint lacks a member the ensemble gives weight (a model saved
  // before the ensemble existed, or with other weights): that member is built from it (not saved).
  const data::Dataset* ensemble_train = nullptr;
  // Where the model computes (its weights are loaded into that backend's memory); null: the host
  // backend (core/backend.h's host_backend()).
  Backend* backend = nullptr;
  // --accept-unchecked-checkpoint: load a manifest that carries no checksum of its own (written by
  // an older frugal, or edited on purpose); by default it is refused.
  bool accept_unchecked_checkpoint = false;
};

// The k best labels of each of `size()` points, best first: row i of `labels` and `scores`.
struct Predictions {
  size_t k = 0;                  // per point: min(asked k, labels)
  std::vector<uint32_t> labels{};  // size() x k
  std::vector<float> scores{};     // the logits (with the ensemble: the blended probabilities), size() x k
  size_t size() const { return k == 0 ? 0 : labels.size() / k; }
  std::span<const uint32_t> labels_of(size_t i) const { return {labels.data() + i * k, k}; }
  std::span<const float> scores_of(size_t i) const { return {scores.data() + i * k, k}; }
};

class Predictor {
 public:
  // Throws frugal::Error naming the file when the directory holds no checkpoint, a damaged one,
  // or one whose configuration cannot be rebuilt.
  explicit Predictor(const std::string& checkpoint_dir, const PredictorOptions& options = {});
  ~Predictor();
  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;

  size_t num_features() const;
  size_t num_labels() const;
  uint64_t epoch() const;  // of the checkpoint
  uint64_t step() const;
  int saved_slices() const;  // model slices the checkpoint was saved with
  // Training label counts saved with the checkpoint (`frugal train --checkpoint` writes them);
  // nullopt for checkpoints without (propensity-scored metrics then need the training file).
  const std::optional<LabelCounts>& label_counts() const;
  // The checkpoint's epoch, step and run, as its manifest says.
  const CheckpointInfo& checkpoint() const;
  // Which checkpoint of the folder was loaded: its best epoch on validation (FOLDER/best) when the
  // run kept one, else the newest (train/served_checkpoint.h).
  const ServedCheckpoint& served() const;
  // Labels this rank has scored so far, over all calls (the cost of inference).
  uint64_t labels_scored() const;

  // Point i's feature ids must be < num_features(); labels in the batch are ignored.
  Predictions top_k(const SparseBatch& batch, size_t k);
  void top_k(const SparseBatch& batch, size_t k, Predictions& out);  // reuses out's buffers
  // Ranking metrics over a data set (P@k, nDCG@k, recall@k, coverage@k; with propensities PSP@k
  // and PSnDCG@k too), as Trainer::evaluate computes them.
  RankingScores evaluate(const data::Dataset& data, const std::vector<size_t>& ks = {1, 3, 5},
                         const Propensities* propensities = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal::train
