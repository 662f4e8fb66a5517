#include "core/ranking_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

std::vector<std::pair<std::string, double>> RankingScores::named() const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, by_k] : {std::pair<const char*, const std::map<size_t, double>*>{"p", &precision},
                                   {"ndcg", &ndcg}, {"psp", &psp}, {"psndcg", &psndcg}, {"recall", &recall},
                                   {"coverage", &coverage}})
    for (const auto& [k, v] : *by_k) out.emplace_back(fmt::format("{}@{}", name, k), v);
  return out;
}

RankingMetrics::RankingMetrics(std::vector<size_t> ks, const Propensities* propensities)
    : ks_(std::move(ks)), propensities_(propensities) {
  FRUGAL_CHECK(!ks_.empty(), "ranking metrics: give at least one k");
  for (const size_t k : ks_) FRUGAL_CHECK(k > 0, "ranking metrics: k must be > 0");
  max_k_ = *std::max_element(ks_.begin(), ks_.end());
  sums_.assign(ks_.size(), {});
  covered_.assign(ks_.size(), {});
}

void RankingMetrics::add(const SparseBatch& batch, const std::vector<uint32_t>& top) {
  const size_t b = batch.size();
  if (b == 0) return;
  FRUGAL_CHECK(top.size() % b == 0, fmt::format("ranking metrics: {} predictions do not split into {} equal rows",
                                                top.size(), b));
  const size_t n = top.size() / b;
  for (size_t i = 0; i < b; ++i) add_point(batch.labels_of(i), top.data() + i * n, n);
  points_ += b;
}

void RankingMetrics::add_point(std::span<const uint32_t> labels, const uint32_t* top, size_t n) {
  truth_.assign(labels.begin(), labels.end());
  std::sort(truth_.begin(), truth_.end());
  truth_.erase(std::unique(truth_.begin(), truth_.end()), truth_.end());
  if (truth_.empty()) return;  // counts 0 everywhere (its point is still in the average)
  if (truth_.back() >= relevant_.size()) relevant_.resize(truth_.back() + size_t{1}, false);
  for (const uint32_t l : truth_) relevant_[l] = true;
  weights_.clear();
  if (propensities_ != nullptr) {
    for (const uint32_t l : truth_) weights_.push_back(propensities_->inverse(l));
    std::sort(weights_.begin(), weights_.end(), std::greater<>());
  }
  const auto y = static_cast<double>(truth_.size());
  double hits = 0, dcg = 0, idcg = 0, psp = 0, psdcg = 0, best_psp = 0, best_psdcg = 0;
  for (size_t j = 0; j < max_k_; ++j) {
    const double discount = 1.0 / std::log2(static_cast<double>(j) + 2.0);
    const uint32_t t = j < n ? top[j] : UINT32_MAX;
    if (t != UINT32_MAX && std::binary_search(truth_.begin(), truth_.end(), t)) {
      const double w = propensities_ != nullptr ? propensities_->inverse(t) : 0.0;
      hits += 1;
      dcg += discount;
      psp += w;
      psdcg += w * discount;
      for (size_t q = 0; q < ks_.size(); ++q) {
        if (ks_[q] <= j) continue;
        if (t >= covered_[q].size()) covered_[q].resize(t + size_t{1}, false);
        covered_[q][t] = true;
      }
    }
    if (j < truth_.size()) {  // the perfect ranking puts a true label here
      idcg += discount;
      if (!weights_.empty()) {
        best_psp += weights_[j];
        best_psdcg += weights_[j] * discount;
      }
    }
    for (size_t q = 0; q < ks_.size(); ++q) {
      if (ks_[q] != j + 1) continue;
      const auto k = static_cast<double>(ks_[q]);
      Sums& s = sums_[q];
      s.precision += hits / k;
      s.ndcg += dcg / idcg;
      s.recall += hits / y;
      s.psp += psp / k;
      s.psp_best += best_psp / k;
      s.psndcg += psdcg / idcg;
      s.psndcg_best += best_psdcg / idcg;
    }
  }
}

RankingScores RankingMetrics::values() const {
  RankingScores out;
  const auto mean = [&](double sum) { return points_ == 0 ? 0.0 : sum / static_cast<double>(points_); };
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const auto relevant = static_cast<double>(std::count(relevant_.begin(), relevant_.end(), true));
  for (size_t q = 0; q < ks_.size(); ++q) {
    const size_t k = ks_[q];
    const Sums& s = sums_[q];
    out.precision[k] = mean(s.precision);
    out.ndcg[k] = mean(s.ndcg);
    out.recall[k] = mean(s.recall);
    out.coverage[k] = ratio(static_cast<double>(std::count(covered_[q].begin(), covered_[q].end(), true)), relevant);
    if (propensities_ != nullptr) {
      out.psp[k] = ratio(s.psp, s.psp_best);
      out.psndcg[k] = ratio(s.psndcg, s.psndcg_best);
    }
  }
  return out;
}

}  // namespace frugal
