// The ranking metrics of an evaluation counted where the top k is computed (Backend::ranking_add):
// the counts stay on the output layer's backend, each batch's true labels go up, and only the sums
// come down, once, when the scores are read. On the CPU the same op runs in host memory; either
// way the scores have RankingMetrics' bits (core/ranking_counts.h is the one program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"

namespace frugal::train {

class RankingCounter {
 public:
  // labels: above every true and predicted label id (the counted flags' width). `propensities`
  // (may be null) must outlive the counter.
  RankingCounter(Backend& backend, std::vector<size_t> ks, size_t labels, const Propensities* propensities);
  // The counter's `labels` for an output of `model_labels` scored on data whose true labels are
  // `truth`: every label the model predicts and the data holds.
  static size_t label_width(size_t model_labels, std::span<const uint32_t> truth);
  size_t max_k() const { return max_k_; }
  // The batch whose top k add() counts next: its true labels go to the backend, its points count.
  // The batch must stay unchanged until the next set_batch.
  void set_batch(const SparseBatch& batch);
  // Rows first_row .. first_row + top.rows() of the batch: their predictions (u32, best first).
  void add(size_t first_row, const Tensor& top);
  size_t points() const { return points_; }
  RankingScores values() const;

 private:
  Backend& backend_;
  std::vector<size_t> ks_;
  size_t max_k_ = 0;
  bool propensities_ = false;
  // The settings as the op reads them (host memory that a host backend's tensors view).
  std::vector<uint64_t> ks64_;
  std::vector<double> discounts_;
  Tensor ks_tensor_, discount_tensor_, inverse_tensor_, label_offsets_, labels_;
  double unseen_ = 1.0;
  RankingState state_;
  size_t points_ = 0;
};

}  // namespace frugal::train
