#include "train/ensemble_ranker.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"

namespace frugal {

void EnsembleOptions::validate() const {
  FRUGAL_CHECK(std::isfinite(weight) && weight >= 0.0f && weight <= 1.0f,
               fmt::format("--ensemble-weight {}: expected a share from 0 (the network alone) to 1 (the label "
                           "centroids alone)", weight));
  FRUGAL_CHECK(std::isfinite(temperature) && temperature > 0.0f && temperature <= 100.0f,
               fmt::format("--ensemble-temperature {}: expected a number above 0 and at most 100", temperature));
  FRUGAL_CHECK(candidates >= 1 && candidates <= 100000,
               fmt::format("ensemble candidates {}: expected 1 to 100000", candidates));
}

// One thread's work space: the centroids' scores per label and the merged candidates.
struct ScratchPool {
  struct Local {
    data::LabelCentroids::Scratch centroid;
    std::vector<std::pair<float, uint32_t>> nearest;
    std::vector<std::pair<uint32_t, float>> merged;  // (label, blended probability)
  };
  tbb::enumerable_thread_specific<Local> locals;
  explicit ScratchPool(const data::LabelCentroids& c) : locals([&c] { return Local{c.scratch(), {}, {}}; }) {}
};

EnsembleRanker::EnsembleRanker(const data::LabelCentroids& centroids, const EnsembleOptions& options)
    : centroids_(centroids), options_(options), pool_(std::make_unique<ScratchPool>(centroids)) {
  options_.validate();
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
  const double w = options_.weight;
  const float inv_t = 1.0f / options_.temperature;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 16), [&](const tbb::blocked_range<size_t>& r) {
    ScratchPool::Local& s = pool_->locals.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      s.merged.clear();
      // The centroids' softmax over their candidates; a point sharing no feature with any centroid
      // has none, and the network's ranking stands alone.
      centroids_.nearest(batch.features_of(i), batch.values_of(i), options_.candidates, s.centroid, s.nearest);
      const double cw = s.nearest.empty() ? 0.0 : w, nw = 1.0 - cw;
      if (!s.nearest.empty()) {
        double csum = 0.0;
        const float top = s.nearest.front().first;
        for (const auto& [cosine, l] : s.nearest) csum += std::exp(static_cast<double>((cosine - top) * inv_t));
        for (const auto& [cosine, l] : s.nearest)
          s.merged.emplace_back(l, static_cast<float>(cw * std::exp(static_cast<double>((cosine - top) * inv_t)) / csum));
      }
      // The network's softmax over its candidates (its logits are best first: [0] is the max).
      const uint32_t* nl = net_labels.data() + i * net_k;
      const float* nz = net_scores.data() + i * net_k;
      double sum = 0.0;
      for (size_t j = 0; j < net_k; ++j) sum += std::exp(static_cast<double>(nz[j]) - nz[0]);
      for (size_t j = 0; j < net_k; ++j)
        s.merged.emplace_back(nl[j], static_cast<float>(nw * std::exp(static_cast<double>(nz[j]) - nz[0]) / sum));
      // A label in both lists sums its two shares.
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

}  // namespace frugal
