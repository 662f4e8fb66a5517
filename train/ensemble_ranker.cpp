#include "train/ensemble_ranker.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"

namespace frugal::train {

void EnsembleOptions::validate() const {
  const auto share = [](float v, const char* flag) {
    FRUGAL_CHECK(std::isfinite(v) && v >= 0.0f && v <= 1.0f,
                 fmt::format("{} {}: expected a share from 0 to 1", flag, v));
  };
  share(weight, "--ensemble-weight");
  share(knn_weight, "--ensemble-knn-weight");
  FRUGAL_CHECK(weight + knn_weight <= 1.0f + 1e-6f,
               fmt::format("--ensemble-weight {} and --ensemble-knn-weight {} add up to more than 1 (the network's "
                           "share is what is left)", weight, knn_weight));
  FRUGAL_CHECK(std::isfinite(temperature) && temperature > 0.0f && temperature <= 100.0f,
               fmt::format("--ensemble-temperature {}: expected a number above 0 and at most 100", temperature));
  FRUGAL_CHECK(neighbours >= 1 && neighbours <= 10000,
               fmt::format("--ensemble-neighbours {}: expected 1 to 10000", neighbours));
  FRUGAL_CHECK(candidates >= 1 && candidates <= 100000, fmt::format("ensemble candidates {}: expected 1 to 100000", candidates));
}

// One thread's work space: the members' scratch and lists, and the merged candidates.
struct ScratchPool {
  struct Local {
    data::LabelCentroids::Scratch centroid;
    data::NearestPoints::Scratch points;
    std::vector<std::pair<float, uint32_t>> cent_list, knn_list, net_list;
    std::vector<std::pair<uint32_t, float>> merged;  // (label, blended probability)
  };
  tbb::enumerable_thread_specific<Local> locals;
  explicit ScratchPool(const EnsembleMembers& m)
      : locals([m] {
          return Local{m.centroids != nullptr ? m.centroids->scratch() : data::LabelCentroids::Scratch{},
                       m.points != nullptr ? m.points->scratch() : data::NearestPoints::Scratch{},
                       {}, {}, {}, {}};
        }) {}
};

namespace {

// Adds share * softmax(score / temperature) over `list` (best first) to `merged`.
void add_softmax(const std::vector<std::pair<float, uint32_t>>& list, double share, double inv_temperature,
                 std::vector<std::pair<uint32_t, float>>& merged) {
  if (list.empty() || share <= 0.0) return;
  const double top = list.front().first;
  double sum = 0.0;
  for (const auto& [score, l] : list) sum += std::exp((score - top) * inv_temperature);
  for (const auto& [score, l] : list)
    merged.emplace_back(l, static_cast<float>(share * std::exp((score - top) * inv_temperature) / sum));
}

}  // namespace

EnsembleRanker::EnsembleRanker(const EnsembleMembers& members, const EnsembleOptions& options)
    : members_(members), options_(options) {
  options_.validate();
  FRUGAL_CHECK(options_.weight == 0.0f || members_.centroids != nullptr,
               "ensemble: --ensemble-weight above 0 needs the label centroids");
  FRUGAL_CHECK(options_.knn_weight == 0.0f || members_.points != nullptr,
               "ensemble: --ensemble-knn-weight above 0 needs the nearest training points");
  pool_ = std::make_unique<ScratchPool>(members_);
}

EnsembleRanker::~EnsembleRanker() = default;

size_t EnsembleRanker::blend(const SparseBatch& batch, const std::vector<uint32_t>& net_labels,
                             const std::vector<float>& net_scores, size_t net_k, size_t k, std::vector<uint32_t>& labels,
                             std::vector<float>& scores) const {
  const size_t b = batch.size();
  FRUGAL_CHECK(net_labels.size() == b * net_k && net_scores.size() == b * net_k,
               fmt::format("ensemble: {} network labels and {} scores for {} points of {} each", net_labels.size(),
                           net_scores.size(), b, net_k));
  const size_t width = std::min(k, net_k);
  labels.assign(b * width, 0);
  scores.assign(b * width, 0.0f);
  const double inv_t = 1.0 / options_.temperature;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 16), [&](const tbb::blocked_range<size_t>& r) {
    ScratchPool::Local& s = pool_->locals.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      const auto ids = batch.features_of(i);
      const auto vals = batch.values_of(i);
      s.cent_list.clear();
      s.knn_list.clear();
      if (options_.weight > 0.0f) members_.centroids->nearest(ids, vals, options_.candidates, s.centroid, s.cent_list);
      if (options_.knn_weight > 0.0f)
        members_.points->vote(ids, vals, options_.neighbours, options_.candidates, s.points, s.knn_list);
      // The shares of the members that have candidates, renormalized (the network always has).
      const double wc = s.cent_list.empty() ? 0.0 : options_.weight;
      const double wk = s.knn_list.empty() ? 0.0 : options_.knn_weight;
      const double wn = 1.0 - options_.weight - options_.knn_weight;
      const double total = wc + wk + wn;
      s.merged.clear();
      add_softmax(s.cent_list, total > 0.0 ? wc / total : 0.0, inv_t, s.merged);
      add_softmax(s.knn_list, total > 0.0 ? wk / total : 0.0, inv_t, s.merged);
      // The network's softmax over its candidates (logits, best first), at temperature 1.
      s.net_list.clear();
      for (size_t j = 0; j < net_k; ++j) s.net_list.emplace_back(net_scores[i * net_k + j], net_labels[i * net_k + j]);
      add_softmax(s.net_list, total > 0.0 ? wn / total : 1.0, 1.0, s.merged);
      // A label in several lists sums its shares.
      std::sort(s.merged.begin(), s.merged.end());
      size_t n = 0;
      for (size_t j = 0; j < s.merged.size(); ++j) {
        if (n > 0 && s.merged[n - 1].first == s.merged[j].first)
          s.merged[n - 1].second += s.merged[j].second;
        else
          s.merged[n++] = s.merged[j];
      }
      s.merged.resize(n);
      const auto better = [](const auto& a, const auto& c) { return a.second != c.second ? a.second > c.second : a.first < c.first; };
      std::partial_sort(s.merged.begin(), s.merged.begin() + static_cast<std::ptrdiff_t>(width), s.merged.end(), better);
      for (size_t j = 0; j < width; ++j) {
        labels[i * width + j] = s.merged[j].first;
        scores[i * width + j] = s.merged[j].second;
      }
    }
  });
  return width;
}

}  // namespace frugal::train
