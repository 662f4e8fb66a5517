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
#include "core/data/nearest_points.h"
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
  const NearestPoints index(train);
  std::vector<uint32_t> top(test.size() * k, UINT32_MAX);
  struct Local {
    NearestPoints::Scratch scratch;
    std::vector<std::pair<float, uint32_t>> votes;
    std::vector<float> by_label;
    std::vector<uint32_t> labels;
  };
  tbb::enumerable_thread_specific<Local> locals(
      [&] { return Local{index.scratch(), {}, std::vector<float>(train.num_labels, 0.0f), {}}; });
  tbb::parallel_for(tbb::blocked_range<size_t>(0, test.size(), 64), [&](const tbb::blocked_range<size_t>& r) {
    Local& s = locals.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      // Each neighbour votes for its labels with its similarity; ties and labels no neighbour
      // has go by training frequency.
      index.vote(test.points.features_of(i), test.points.values_of(i), neighbours, train.num_labels, s.scratch, s.votes);
      s.labels.clear();
      for (const auto& [votes, l] : s.votes) {
        s.by_label[l] = votes;
        s.labels.push_back(l);
      }
      write_ranking(s.labels, [&](uint32_t l) { return s.by_label[l]; }, [&](uint32_t l) { return s.by_label[l] != 0.0f; },
                    freq, k, top.data() + i * k);
      for (const auto& [votes, l] : s.votes) s.by_label[l] = 0.0f;
    }
  });
  metric.add(test.points, top);
  return metric.values();
}

}  // namespace frugal::data
