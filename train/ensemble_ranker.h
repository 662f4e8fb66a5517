// `--infer ensemble`: the network's ranking blended with two simple rankers over the input
// features: each label's centroid (core/data/label_centroids.h) and the label votes of the
// nearest training points (core/data/nearest_points.h). On few-shot label sets (a point or two
// per label) the network learns the frequent labels well but its rare labels' rows from a point
// or two (on GCIDE min5 it wins on labels with 10+ training points and loses on those with 2-4:
// bench/REPORT.md), while the input-space rankers keep every rare label's points as they were;
// they make different mistakes, and a blend of their probabilities ranks better than any of them
// (as kNN-LM interpolates a language model with a nearest-neighbour distribution, Khandelwal et
// al. 2020).
//
// For each point, over the network's `candidates` best labels and each member's:
//   p_net(l)  = softmax of the network's logits over its candidates,
//   p_cent(l) = softmax of cosine / temperature over the centroids' best `candidates` (cosine > 0),
//   p_knn(l)  = softmax of votes / temperature over the labels of the `neighbours` nearest
//               training points (votes: summed cosines),
//   score(l)  = (1 - weight - knn_weight) p_net(l) + weight p_cent(l) + knn_weight p_knn(l)
// (0 for a list a label is not in), and the k best scores (ties by label id) are the prediction.
// A member with no candidates for the point (it shares no feature with the training set) gives
// its share to the others in proportion; weight 0 and knn_weight 0 rank as the network does.
// Points are blended in parallel; the result does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/data/label_centroids.h"
#include "core/data/nearest_points.h"
#include "core/sparse_batch.h"

namespace frugal::train {

struct EnsembleOptions {
  // Defaults measured over the few-shot sets of bench/quality (bench/REPORT.md "Ensemble inference").
  float weight = 0.5f;      // --ensemble-weight: the label centroids' share
  float knn_weight = 0.2f;  // --ensemble-knn-weight: the nearest training points' share
  float temperature = 0.05f;
  size_t neighbours = 10;   // training points that vote
  size_t candidates = 100;  // per member and point
  void validate() const;    // throws frugal::Error naming the flag
};

// The rankers the blend reads (not owned; each must be given when its weight is above 0).
struct EnsembleMembers {
  const data::LabelCentroids* centroids = nullptr;
  const data::NearestPoints* points = nullptr;
};

// One point's candidates from each member (score, label), best first: what blend() mixes. The
// members' lists do not change as the network trains, so a caller that tries many blends over the
// same points (train/ensemble_choice.h) computes them once.
struct MemberLists {
  std::vector<std::pair<float, uint32_t>> centroids, neighbours;
};

class EnsembleRanker {
 public:
  EnsembleRanker(const EnsembleMembers& members, const EnsembleOptions& options);
  ~EnsembleRanker();
  const EnsembleOptions& options() const { return options_; }

  // net_labels / net_scores: the network's best labels and their logits, batch.size() x
  // net_k, best first. Writes each point's min(k, net_k) best blended labels and their scores
  // into `labels` / `scores` (batch.size() rows) and returns that width.
  size_t blend(const SparseBatch& batch, const std::vector<uint32_t>& net_labels, const std::vector<float>& net_scores,
               size_t net_k, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) const;

  // Point `i` of `batch`: each member's `candidates` best labels (a member of weight 0: none).
  // Thread-safe (each thread its own scratch).
  void member_lists(const SparseBatch& batch, size_t i, MemberLists& out) const;
  // The blend of one point's lists under `options`' shares and temperature: (label, blended
  // probability) of every candidate, best first (ties by label id), the best `width` of them at the
  // front. `net`: the network's (logit, label), best first; `merged`: the caller's work space.
  static void mix(const MemberLists& members, const std::vector<std::pair<float, uint32_t>>& net,
                  const EnsembleOptions& options, size_t width, std::vector<std::pair<uint32_t, float>>& merged);

 private:
  EnsembleMembers members_;
  EnsembleOptions options_;
  std::unique_ptr<struct ScratchPool> pool_;
};

}  // namespace frugal::train
