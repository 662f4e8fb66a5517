#include "core/data/reference_rankers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/data/label_centroids.h"
#include "core/metrics.h"

namespace frugal::data {
namespace {

void check_compatible(const Dataset& train, const Dataset& test) {
  FRUGAL_CHECK(train.num_features == test.num_features && train.num_labels == test.num_labels,
               fmt::format("{} has {} features and {} labels, {} has {} and {}", train.source, train.num_features,
                           train.num_labels, test.source, test.num_features, test.num_labels));
}

// Labels by decreasing training frequency (ties by id): the fallback order of every ranker, and
// its tie-break (rank_of[l]: position of label l in that order).
struct FrequencyOrder {
  std::vector<uint32_t> order, rank_of;
  explicit FrequencyOrder(const Dataset& train) : order(train.num_labels), rank_of(train.num_labels) {
    std::vector<uint64_t> freq(train.num_labels, 0);
    for (const uint32_t l : train.points.label_ids) ++freq[l];
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return freq[a] > freq[b]; });
    for (uint32_t r = 0; r < order.size(); ++r) rank_of[order[r]] = r;
  }
};

// Writes a point's k labels to `out`: the best `candidates` by score (ties by training frequency),
// then, when fewer than k labels scored, the most frequent labels that are not candidates.
template <class Score, class IsCandidate>
void write_ranking(std::vector<uint32_t>& candidates, Score score, IsCandidate is_candidate,
                   const FrequencyOrder& freq, size_t k, uint32_t* out) {
  const auto better = [&](uint32_t a, uint32_t b) {
    const float sa = score(a), sb = score(b);
    return sa != sb ? sa > sb : freq.rank_of[a] < freq.rank_of[b];
  };
  const size_t m = std::min(k, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(m), candidates.end(), better);
  std::copy_n(candidates.begin(), m, out);
  for (size_t j = m, f = 0; j < k && f < freq.order.size(); ++f)
    if (!is_candidate(freq.order[f])) out[j++] = freq.order[f];
}

// Training points stored feature-major (an inverted index), L2-normalized: for feature f, the
// (point, value / |point|) pairs of every point that has f, in point order. A sparse test point's
// dot products with all training points then touch only the points it shares a feature with.
struct PointIndex {
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> points;
  std::vector<float> values;

  explicit PointIndex(const Dataset& train) : offsets(train.num_features + size_t{1}, 0) {
    for (const uint32_t f : train.points.feature_ids) ++offsets[f + size_t{1}];
    std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
    points.resize(offsets.back());
    values.resize(offsets.back());
    std::vector<uint64_t> pos(offsets.begin(), offsets.end() - 1);
    for (uint32_t i = 0; i < train.size(); ++i) {
      const auto ids = train.points.features_of(i);
      const auto vals = train.points.values_of(i);
      const float inv = inverse_norm(vals);
      for (size_t j = 0; j < ids.size(); ++j) {
        points[pos[ids[j]]] = i;
        values[pos[ids[j]]++] = vals[j] * inv;
      }
    }
  }
  static float inverse_norm(std::span<const float> v) {
    double sq = 0.0;
    for (const float x : v) sq += static_cast<double>(x) * x;
    return sq > 0.0 ? static_cast<float>(1.0 / std::sqrt(sq)) : 0.0f;
  }
};

struct KnnScratch {
  std::vector<float> sims;            // by training point, valid where point_stamp == the test point's stamp
  std::vector<uint32_t> point_stamp;  // stamps instead of clearing the arrays after every point
  std::vector<uint32_t> touched;
  std::vector<std::pair<float, uint32_t>> best;  // (similarity, training point), most similar first
  std::vector<float> votes;
  std::vector<uint32_t> label_stamp, labels;

  KnnScratch(size_t points, size_t num_labels)
      : sims(points, 0.0f), point_stamp(points, 0), votes(num_labels, 0.0f), label_stamp(num_labels, 0) {}

  // Fills `best` with the (at most) n training points of highest positive cosine similarity to
  // the point (ids, vals); ties by point id.
  void nearest(const PointIndex& index, std::span<const uint32_t> ids, std::span<const float> vals, uint32_t stamp,
               size_t n) {
    touched.clear();
    const float inv = PointIndex::inverse_norm(vals);
    for (size_t j = 0; j < ids.size(); ++j) {
      const float x = vals[j] * inv;
      for (uint64_t q = index.offsets[ids[j]]; q < index.offsets[ids[j] + 1]; ++q) {
        const uint32_t p = index.points[q];
        if (point_stamp[p] != stamp) {
          point_stamp[p] = stamp;
          sims[p] = 0.0f;
          touched.push_back(p);
        }
        sims[p] += x * index.values[q];
      }
    }
    best.clear();
    for (const uint32_t p : touched)
      if (sims[p] > 0.0f) best.emplace_back(sims[p], p);
    const auto closer = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
    const size_t m = std::min(n, best.size());
    std::partial_sort(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(m), best.end(), closer);
    best.resize(m);
  }
};

}  // namespace

std::map<size_t, double> most_frequent_precision(const Dataset& train, const Dataset& test,
                                                 const std::vector<size_t>& ks) {
  check_compatible(train, test);
  PrecisionAtK metric(ks);
  const FrequencyOrder freq(train);
  std::vector<uint32_t> top;
  for (size_t i = 0; i < test.size(); ++i)
    for (size_t j = 0; j < metric.max_k(); ++j) top.push_back(j < freq.order.size() ? freq.order[j] : UINT32_MAX);
  metric.add(test.points, top);
  return metric.values();
}

std::map<size_t, double> label_centroid_precision(const Dataset& train, const Dataset& test,
                                                  const std::vector<size_t>& ks) {
  check_compatible(train, test);
  PrecisionAtK metric(ks);
  const size_t k = metric.max_k();
  const FrequencyOrder freq(train);
  const LabelCentroids centroids(train);
  std::vector<uint32_t> top(test.size() * k, UINT32_MAX);
  tbb::enumerable_thread_specific<LabelCentroids::Scratch> scratch([&] { return centroids.scratch(); });
  tbb::parallel_for(tbb::blocked_range<size_t>(0, test.size(), 64), [&](const tbb::blocked_range<size_t>& r) {
    LabelCentroids::Scratch& s = scratch.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      s.touched.clear();
      centroids.accumulate(test.points.features_of(i), test.points.values_of(i), s);
      // Labels sharing no feature with the point (score 0) come after, by training frequency.
      write_ranking(s.touched, [&](uint32_t l) { return s.scores[l]; }, [&](uint32_t l) { return s.scores[l] != 0.0f; },
                    freq, k, top.data() + i * k);
      for (const uint32_t l : s.touched) s.scores[l] = 0.0f;
    }
  });
  metric.add(test.points, top);
  return metric.values();
}

std::map<size_t, double> knn_precision(const Dataset& train, const Dataset& test, const std::vector<size_t>& ks,
                                       size_t neighbours) {
  check_compatible(train, test);
  FRUGAL_CHECK(neighbours > 0, "kNN: neighbours must be > 0");
  PrecisionAtK metric(ks);
  const size_t k = metric.max_k();
  const FrequencyOrder freq(train);
  const PointIndex index(train);
  std::vector<uint32_t> top(test.size() * k, UINT32_MAX);
  tbb::enumerable_thread_specific<KnnScratch> scratch([&] { return KnnScratch(train.size(), train.num_labels); });
  tbb::parallel_for(tbb::blocked_range<size_t>(0, test.size(), 64), [&](const tbb::blocked_range<size_t>& r) {
    KnnScratch& s = scratch.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      const auto stamp = static_cast<uint32_t>(i + 1);
      s.nearest(index, test.points.features_of(i), test.points.values_of(i), stamp, neighbours);
      // Each neighbour votes for its labels with its similarity (in similarity order: the sums are
      // the same whatever thread runs the point).
      s.labels.clear();
      for (const auto& [sim, point] : s.best)
        for (const uint32_t l : train.points.labels_of(point)) {
          if (s.label_stamp[l] != stamp) {
            s.label_stamp[l] = stamp;
            s.votes[l] = 0.0f;
            s.labels.push_back(l);
          }
          s.votes[l] += sim;
        }
      write_ranking(s.labels, [&](uint32_t l) { return s.votes[l]; }, [&](uint32_t l) { return s.label_stamp[l] == stamp; },
                    freq, k, top.data() + i * k);
    }
  });
  metric.add(test.points, top);
  return metric.values();
}

}  // namespace frugal::data
