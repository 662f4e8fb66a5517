#include "train/ensemble_choice.h"

#include <algorithm>
#include <cmath>

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/data/batch_loader.h"
#include "core/sparse_batch.h"
#include "train/trainer.h"

namespace frugal::train {

std::vector<EnsembleOptions> ensemble_grid(const EnsembleOptions& base, const EnsembleMembers& members) {
  std::vector<EnsembleOptions> grid{base};
  const std::vector<float> centroid_shares = members.centroids != nullptr ? std::vector<float>{0.0f, 0.2f, 0.35f, 0.5f, 0.65f, 0.8f}
                                                                          : std::vector<float>{0.0f};
  const std::vector<float> knn_shares = members.points != nullptr ? std::vector<float>{0.0f, 0.1f, 0.2f, 0.35f, 0.5f, 0.7f}
                                                                  : std::vector<float>{0.0f};
  for (const float temperature : {0.02f, 0.05f, 0.1f})
    for (const float weight : centroid_shares)
      for (const float knn : knn_shares) {
        if (weight + knn > 1.0f + 1e-6f) continue;
        EnsembleOptions o = base;
        o.weight = weight;
        o.knn_weight = knn;
        o.temperature = temperature;
        if (o.weight == base.weight && o.knn_weight == base.knn_weight && o.temperature == base.temperature) continue;
        grid.push_back(o);
      }
  return grid;
}

EnsembleChoice::EnsembleChoice(const EnsembleMembers& members, const EnsembleOptions& base, const data::Dataset& valid,
                               size_t batch)
    : valid_(valid), batch_(batch), candidates_(base.candidates), grid_(ensemble_grid(base, members)) {
  // Every member's candidates of every point, at full weight (the grid only reweighs them).
  EnsembleOptions all = base;
  all.weight = members.centroids != nullptr ? 0.5f : 0.0f;
  all.knn_weight = members.points != nullptr ? 0.5f : 0.0f;
  const EnsembleRanker ranker(members, all);
  lists_.resize(valid.size());
  data::BatchLoader loader(valid, {.batch = batch_, .shuffle = false});
  SparseBatch b;
  for (size_t first = 0; loader.next(b); first += b.size())
    tbb::parallel_for(tbb::blocked_range<size_t>(0, b.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i < r.end(); ++i) ranker.member_lists(b, i, lists_[first + i]);
    });
}

EnsembleScore EnsembleChoice::choose(Trainer& trainer, EnsembleScore* base_score) {
  // The network's candidates of every validation point (this epoch's model).
  const size_t n = valid_.size();
  std::vector<std::vector<std::pair<float, uint32_t>>> net(n);
  {
    data::BatchLoader loader(valid_, {.batch = batch_, .shuffle = false});
    SparseBatch b;
    std::vector<uint32_t> labels;
    std::vector<float> scores;
    for (size_t first = 0; loader.next(b); first += b.size()) {
      trainer.predict(b, candidates_, labels, scores);
      const size_t k = b.size() > 0 ? labels.size() / b.size() : 0;
      for (size_t i = 0; i < b.size(); ++i)
        for (size_t j = 0; j < k; ++j) net[first + i].emplace_back(scores[i * k + j], labels[i * k + j]);
    }
  }
  // Each blend's hits at 1 and 5 over the points, and its per-point score against the base blend's
  // (the paired difference, whose spread says whether a better total is more than the points' noise).
  struct Hits {  // integer counts, so that the sums do not depend on how the points were split over threads
    std::vector<uint64_t> at1, at5;
    std::vector<int64_t> diff, diff_squared;  // in units of 1/5 point
    std::vector<std::pair<uint32_t, float>> merged;
  };
  const size_t blends = grid_.size();
  tbb::enumerable_thread_specific<Hits> hits([&] {
    return Hits{std::vector<uint64_t>(blends), std::vector<uint64_t>(blends), std::vector<int64_t>(blends),
                std::vector<int64_t>(blends), {}};
  });
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 32), [&](const tbb::blocked_range<size_t>& r) {
    Hits& h = hits.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      const auto truth = valid_.points.labels_of(i);
      const auto relevant = [&](uint32_t l) { return std::find(truth.begin(), truth.end(), l) != truth.end(); };
      int64_t base_score = 0;
      for (size_t g = 0; g < blends; ++g) {
        EnsembleRanker::mix(lists_[i], net[i], grid_[g], 5, h.merged);
        const size_t top = std::min<size_t>(5, h.merged.size());
        uint64_t first = 0, found = 0;
        for (size_t j = 0; j < top; ++j) {
          if (!relevant(h.merged[j].first)) continue;
          if (j == 0) first = 1;
          ++found;
        }
        h.at1[g] += first;
        h.at5[g] += found;
        // The point's P@1 + P@5, times 5.
        const int64_t score = static_cast<int64_t>(5 * first + found);
        if (g == 0) base_score = score;
        h.diff[g] += score - base_score;
        h.diff_squared[g] += (score - base_score) * (score - base_score);
      }
    }
  });
  std::vector<uint64_t> at1(blends, 0), at5(blends, 0);
  std::vector<int64_t> diff(blends, 0), diff_squared(blends, 0);
  for (const Hits& h : hits)
    for (size_t g = 0; g < blends; ++g) {
      at1[g] += h.at1[g], at5[g] += h.at5[g];
      diff[g] += h.diff[g], diff_squared[g] += h.diff_squared[g];
    }
  const double points = n > 0 ? static_cast<double>(n) : 1.0;
  const auto scored = [&](size_t g) {
    return EnsembleScore{.options = grid_[g], .index = g, .p1 = static_cast<double>(at1[g]) / points,
                         .p5 = static_cast<double>(at5[g]) / (5.0 * points)};
  };
  EnsembleScore best = scored(0);
  if (base_score != nullptr) *base_score = best;
  // A blend replaces the base only where it is better by more than kMinStandardErrors standard
  // errors of the paired difference: with a few thousand points, most of the grid's spread is noise,
  // and chasing it is what a held-out test set then pays for.
  double best_gain = 0.0;
  for (size_t g = 1; g < blends; ++g) {
    const double mean = static_cast<double>(diff[g]) / points;
    const double variance = std::max(0.0, static_cast<double>(diff_squared[g]) / points - mean * mean);
    const double standard_error = std::sqrt(variance / points);
    if (mean <= kMinStandardErrors * standard_error || mean <= best_gain) continue;
    best_gain = mean;
    best = scored(g);
  }
  return best;
}

}  // namespace frugal::train
