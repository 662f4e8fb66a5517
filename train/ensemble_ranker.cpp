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
    MemberLists lists;
    std::vector<std::pair<float, uint32_t>> net_list;
    std::vector<std::pair<uint32_t, float>> merged;  // (label, blended probability)
  };
  tbb::enumerable_thread_specific<Local> locals;
  explicit ScratchPool(const EnsembleMembers& m)
      : locals([m] {
          return Local{m.centroids != nullptr ? m.centroids->scratch() : data::LabelCentroids::Scratch{},
                       m.points != nullptr ? m.points->scratch() : data::NearestPoints::Scratch{},
                       {}, {}, {}};
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
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 16), [&](const tbb::blocked_range<size_t>& r) {
    ScratchPool::Local& s = pool_->locals.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      member_lists(batch, i, s.lists);
      // The network's softmax over its candidates (logits, best first).
      s.net_list.clear();
      for (size_t j = 0; j < net_k; ++j) s.net_list.emplace_back(net_scores[i * net_k + j], net_labels[i * net_k + j]);
      mix(s.lists, s.net_list, options_, width, s.merged);
      for (size_t j = 0; j < width; ++j) {
        labels[i * width + j] = s.merged[j].first;
        scores[i * width + j] = s.merged[j].second;
      }
    }
  });
  return width;
}

void EnsembleRanker::member_lists(const SparseBatch& batch, size_t i, MemberLists& out) const {
  ScratchPool::Local& s = pool_->locals.local();
  const auto ids = batch.features_of(i);
  const auto vals = batch.values_of(i);
  out.centroids.clear();
  out.neighbours.clear();
  if (options_.weight > 0.0f) members_.centroids->nearest(ids, vals, options_.candidates, s.centroid, out.centroids);
  if (options_.knn_weight > 0.0f)
    members_.points->vote(ids, vals, options_.neighbours, options_.candidates, s.points, out.neighbours);
}

void EnsembleRanker::mix(const MemberLists& members, const std::vector<std::pair<float, uint32_t>>& net,
                         const EnsembleOptions& options, size_t width, std::vector<std::pair<uint32_t, float>>& merged) {
  const double inv_t = 1.0 / options.temperature;
  // The shares of the members that have candidates, renormalized (the network always has).
  const double wc = members.centroids.empty() ? 0.0 : options.weight;
  const double wk = members.neighbours.empty() ? 0.0 : options.knn_weight;
  const double wn = 1.0 - options.weight - options.knn_weight;
  const double total = wc + wk + wn;
  merged.clear();
  add_softmax(members.centroids, total > 0.0 ? wc / total : 0.0, inv_t, merged);
  add_softmax(members.neighbours, total > 0.0 ? wk / total : 0.0, inv_t, merged);
  // The network's softmax over its candidates, at temperature 1.
  add_softmax(net, total > 0.0 ? wn / total : 1.0, 1.0, merged);
  // A label in several lists sums its shares.
  std::sort(merged.begin(), merged.end());
  size_t n = 0;
  for (size_t j = 0; j < merged.size(); ++j) {
    if (n > 0 && merged[n - 1].first == merged[j].first)
      merged[n - 1].second += merged[j].second;
    else
      merged[n++] = merged[j];
  }
  merged.resize(n);
  const auto better = [](const auto& a, const auto& c) { return a.second != c.second ? a.second > c.second : a.first < c.first; };
  std::partial_sort(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(std::min(width, n)), merged.end(), better);
}

}  // namespace frugal::train
