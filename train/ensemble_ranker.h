// `--infer ensemble`: the network's ranking blended with the label-centroid ranker's
// (core/data/label_centroids.h). On few-shot label sets (a point or two per label) the network
// learns the frequent labels' boundaries and a representation, while the centroids keep every
// rare label's training points as they were; the two make different mistakes, and a blend of
// their probabilities ranks better than either (as kNN-LM interpolates a language model with a
// nearest-neighbour distribution, Khandelwal et al. 2020).
//
// For each point, over the network's `candidates` best labels and the centroids' `candidates`
// best (cosine > 0):
//   p_net(l)  = softmax of the network's logits over its candidates,
//   p_cent(l) = softmax of cosine / temperature over the centroids' candidates,
//   score(l)  = (1 - weight) p_net(l) + weight p_cent(l)     (0 for a list a label is not in),
// and the k best scores (ties by label id) are the prediction. weight 0 ranks as the network
// does, weight 1 as the centroids do. A point sharing no feature with any centroid keeps the
// network's ranking. Points are blended in parallel; the result does not depend on threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/data/label_centroids.h"
#include "core/sparse_batch.h"

namespace frugal {

struct EnsembleOptions {
  // Defaults measured over the few-shot sets of bench/quality (bench/REPORT.md "--infer ensemble").
  float weight = 0.5f;
  float temperature = 0.05f;
  size_t candidates = 100;  // per member and point
  void validate() const;    // throws frugal::Error naming the flag
};

class EnsembleRanker {
 public:
  // `centroids` must outlive the ranker.
  EnsembleRanker(const data::LabelCentroids& centroids, const EnsembleOptions& options);
  ~EnsembleRanker();
  const EnsembleOptions& options() const { return options_; }
  const data::LabelCentroids& centroids() const { return centroids_; }

  // net_labels / net_scores: the network's best labels and their logits, batch.size() x
  // net_k, best first. Writes each point's min(k, net_k) best blended labels and their scores
  // into `labels` / `scores` (batch.size() rows) and returns that width.
  size_t blend(const SparseBatch& batch, const std::vector<uint32_t>& net_labels, const std::vector<float>& net_scores,
               size_t net_k, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) const;

 private:
  const data::LabelCentroids& centroids_;
  EnsembleOptions options_;
  std::unique_ptr<struct ScratchPool> pool_;
};

}  // namespace frugal
