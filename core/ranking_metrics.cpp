#include "core/ranking_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "core/ranking_counts.h"

namespace frugal {

std::vector<std::pair<std::string, double>> RankingScores::named() const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, by_k] : {std::pair<const char*, const std::map<size_t, double>*>{"p", &precision},
                                   {"ndcg", &ndcg}, {"psp", &psp}, {"psndcg", &psndcg}, {"recall", &recall},
                                   {"coverage", &coverage}})
    for (const auto& [k, v] : *by_k) out.emplace_back(fmt::format("{}@{}", name, k), v);
  return out;
}

std::vector<double> ranking_discounts(size_t max_k) {
  std::vector<double> d(max_k);
  for (size_t j = 0; j < max_k; ++j) d[j] = 1.0 / std::log2(static_cast<double>(j) + 2.0);
  return d;
}

RankingScores ranking_scores(const std::vector<size_t>& ks, std::span<const double> sums,
                             std::span<const uint64_t> covered, uint64_t relevant, uint64_t points,
                             bool propensities) {
  FRUGAL_CHECK(sums.size() == ks.size() * ranking::kSums && covered.size() == ks.size(),
               "ranking metrics: the counted sums do not match the cut-offs");
  RankingScores out;
  const auto mean = [&](double sum) { return points == 0 ? 0.0 : sum / static_cast<double>(points); };
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (size_t q = 0; q < ks.size(); ++q) {
    const size_t k = ks[q];
    const double* s = sums.data() + q * ranking::kSums;
    out.precision[k] = mean(s[ranking::precision]);
    out.ndcg[k] = mean(s[ranking::ndcg]);
    out.recall[k] = mean(s[ranking::recall]);
    out.coverage[k] = ratio(static_cast<double>(covered[q]), static_cast<double>(relevant));
    if (propensities) {
      out.psp[k] = ratio(s[ranking::psp], s[ranking::psp_best]);
      out.psndcg[k] = ratio(s[ranking::psndcg], s[ranking::psndcg_best]);
    }
  }
  return out;
}

RankingMetrics::RankingMetrics(std::vector<size_t> ks, const Propensities* propensities)
    : ks_(std::move(ks)), propensities_(propensities) {
  FRUGAL_CHECK(!ks_.empty(), "ranking metrics: give at least one k");
  for (const size_t k : ks_) FRUGAL_CHECK(k > 0, "ranking metrics: k must be > 0");
  max_k_ = *std::max_element(ks_.begin(), ks_.end());
  ks64_.assign(ks_.begin(), ks_.end());
  discounts_ = ranking_discounts(max_k_);
  sums_.assign(ks_.size() * ranking::kSums, 0.0);
  point_.resize(sums_.size());
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
  if (!truth_.empty() && truth_.back() >= relevant_.size()) relevant_.resize(truth_.back() + size_t{1}, false);
  weights_.clear();
  if (propensities_ != nullptr) {
    for (const uint32_t l : truth_) weights_.push_back(propensities_->inverse(l));
    std::sort(weights_.begin(), weights_.end(), std::greater<>());
  }
  const std::vector<double>* inverse = propensities_ != nullptr ? &propensities_->inverse_by_label() : nullptr;
  const ranking::Spec spec{.ks = ks64_.data(), .num_ks = ks64_.size(), .max_k = max_k_, .discounts = discounts_.data(),
                           .inverse = inverse != nullptr ? inverse->data() : nullptr,
                           .num_inverse = inverse != nullptr ? inverse->size() : 0,
                           .unseen = propensities_ != nullptr ? propensities_->unseen_inverse() : 1.0};
  struct Marks {
    RankingMetrics& m;
    void relevant(uint32_t l) { m.relevant_[l] = true; }
    void covered(uint64_t q, uint32_t t) {
      std::vector<bool>& c = m.covered_[q];
      if (t >= c.size()) c.resize(t + size_t{1}, false);
      c[t] = true;
    }
  } marks{*this};
  ranking::point(spec, truth_.data(), truth_.size(), propensities_ != nullptr ? weights_.data() : nullptr, top, n,
                 point_.data(), marks);
  for (size_t c = 0; c < sums_.size(); ++c) sums_[c] += point_[c];
}

RankingScores RankingMetrics::values() const {
  std::vector<uint64_t> covered(ks_.size());
  for (size_t q = 0; q < ks_.size(); ++q)
    covered[q] = static_cast<uint64_t>(std::count(covered_[q].begin(), covered_[q].end(), true));
  const auto relevant = static_cast<uint64_t>(std::count(relevant_.begin(), relevant_.end(), true));
  return ranking_scores(ks_, sums_, covered, relevant, points_, propensities_ != nullptr);
}

}  // namespace frugal
