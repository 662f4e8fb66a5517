// Ranking metrics of extreme classification at cut-offs k, as the Extreme Classification
// Repository (and its pyxclib) defines them. For a point with true labels Y and predictions
// t_1, t_2, ... (best first), hit_j = [t_j in Y]:
//   P@k        = (1/k) sum_{j<=k} hit_j
//   nDCG@k     = DCG@k / IDCG@k, DCG@k = sum_{j<=k} hit_j / log2(j+1), IDCG@k the DCG of a perfect
//                ranking (min(k, |Y|) hits first)
//   recall@k   = sum_{j<=k} hit_j / |Y|
// each averaged over the points; a point without labels counts 0 in all three (as in PrecisionAtK).
// With label propensities (core/propensity.h), hits are weighted by 1/p_l and normalized by the
// best achievable ranking (each point's true labels sorted by 1/p_l), as the repository does:
//   PSP@k      = sum_i PSP_i@k / sum_i best PSP_i@k      (PSP_i@k = (1/k) sum_{j<=k} hit_j / p_{t_j})
//   PSnDCG@k   = sum_i PSDCG_i@k / IDCG_i@k / sum_i best PSDCG_i@k / IDCG_i@k
// i.e. the ratio of the test-set averages (not the average of per-point ratios), in [0, 1].
//   coverage@k = distinct labels that are a hit in some point's top k / distinct labels in the
//                test set's ground truth (label coverage, how much of the label space is reached).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/propensity.h"
#include "core/sparse_batch.h"

namespace frugal {

// Every metric by k. psp and psndcg are empty when no propensities were given.
struct RankingScores {
  std::map<size_t, double> precision, ndcg, psp, psndcg, recall, coverage;
  // ("p@1", v), ("p@3", v), ..., then ndcg@k, psp@k, psndcg@k, recall@k, coverage@k: the keys of
  // `frugal evaluate`, its JSON and the training log, in that order.
  std::vector<std::pair<std::string, double>> named() const;
};

// The scores from what was counted: sums (ks.size() x ranking::kSums, core/ranking_counts.h) over
// `points` points, covered[q] labels hit within the first ks[q], `relevant` labels in the ground
// truth. psp and psndcg only with propensities.
RankingScores ranking_scores(const std::vector<size_t>& ks, std::span<const double> sums,
                             std::span<const uint64_t> covered, uint64_t relevant, uint64_t points,
                             bool propensities);
// 1 / log2(j + 2) for j < max_k: the discounts of nDCG (ranking::Spec::discounts).
std::vector<double> ranking_discounts(size_t max_k);

class RankingMetrics {
 public:
  // `propensities` (not owned, may be null) must outlive the metrics.
  explicit RankingMetrics(std::vector<size_t> ks, const Propensities* propensities = nullptr);
  size_t max_k() const { return max_k_; }
  // top: batch.size() rows of predictions, best first, row-major with the same length per row
  // (usually max_k(); fewer when there are fewer labels). UINT32_MAX marks "no prediction".
  void add(const SparseBatch& batch, const std::vector<uint32_t>& top);
  RankingScores values() const;
  size_t points() const { return points_; }

 private:
  void add_point(std::span<const uint32_t> labels, const uint32_t* top, size_t n);
  std::vector<size_t> ks_;
  std::vector<uint64_t> ks64_;       // ks_ as the program reads them
  std::vector<double> discounts_;
  size_t max_k_ = 0;
  const Propensities* propensities_;
  std::vector<double> sums_;   // per requested k (index q of ks_), ranking::kSums, added point by point
  std::vector<double> point_;  // scratch: one point's share
  size_t points_ = 0;
  // Labels hit within the first k (per k) and labels of the ground truth, as bitmaps by label id.
  std::vector<std::vector<bool>> covered_;
  std::vector<bool> relevant_;
  std::vector<uint32_t> truth_;  // scratch: a point's labels, sorted, duplicates removed
  std::vector<double> weights_;  // scratch: their 1/p, best first
};

}  // namespace frugal
