#include "train/ranking_counter.h"

#include <algorithm>

#include "core/check.h"
#include "core/ranking_counts.h"

namespace frugal::train {

RankingCounter::RankingCounter(Backend& backend, std::vector<size_t> ks, size_t labels,
                               const Propensities* propensities)
    : backend_(backend), ks_(std::move(ks)), propensities_(propensities != nullptr) {
  FRUGAL_CHECK(!ks_.empty(), "ranking metrics: give at least one k");
  for (const size_t k : ks_) FRUGAL_CHECK(k > 0, "ranking metrics: k must be > 0");
  max_k_ = *std::max_element(ks_.begin(), ks_.end());
  ks64_.assign(ks_.begin(), ks_.end());
  discounts_ = ranking_discounts(max_k_);
  values_where(ks_tensor_, ks64_, Dtype::u64, backend_);
  values_where(discount_tensor_, discounts_, Dtype::f64, backend_);
  if (propensities != nullptr) {
    values_where(inverse_tensor_, propensities->inverse_by_label(), Dtype::f64, backend_);
    unseen_ = propensities->unseen_inverse();
  }
  state_.sums = Tensor(ks_.size(), ranking::kSums, Dtype::f64, backend_);
  state_.covered = Tensor(ks_.size(), ranking_flag_words(labels), Dtype::u32, backend_);
  state_.relevant = Tensor(1, ranking_flag_words(labels), Dtype::u32, backend_);
  state_.counts = Tensor(1, ks_.size() + 1, Dtype::u64, backend_);
}

void RankingCounter::set_batch(const SparseBatch& batch) {
  values_where(label_offsets_, batch.label_offsets, Dtype::u64, backend_);
  values_where(labels_, batch.label_ids, Dtype::u32, backend_);
  points_ += batch.size();
}

void RankingCounter::add(size_t first_row, const Tensor& top) {
  backend_.ranking_add({.top = &top, .label_offsets = &label_offsets_, .labels = &labels_, .first_row = first_row,
                        .ks = &ks_tensor_, .discounts = &discount_tensor_,
                        .inverse = propensities_ ? &inverse_tensor_ : nullptr, .unseen = unseen_},
                       state_);
}

RankingScores RankingCounter::values() const {
  std::vector<double> sums(state_.sums.size());
  std::vector<uint64_t> counts(state_.counts.size());
  copy_to_host(state_.sums, sums.data());
  copy_to_host(state_.counts, counts.data());
  return ranking_scores(ks_, sums, std::span<const uint64_t>(counts).first(ks_.size()), counts.back(), points_,
                        propensities_);
}

size_t RankingCounter::label_width(size_t model_labels, std::span<const uint32_t> truth) {
  return std::max<size_t>(model_labels, truth.empty() ? 0 : size_t{*std::max_element(truth.begin(), truth.end())} + 1);
}

}  // namespace frugal::train
