#include "core/reference_rankers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/metrics.h"

namespace frugal::data {
namespace {

void check_compatible(const Dataset& train, const Dataset& test) {
  FRUGAL_CHECK(train.num_features == test.num_features && train.num_labels == test.num_labels,
               fmt::format("{} has {} features and {} labels, {} has {} and {}", train.source, train.num_features,
                           train.num_labels, test.source, test.num_features, test.num_labels));
}

// Labels by decreasing training frequency (ties by id): the fallback order of both rankers.
std::vector<uint32_t> labels_by_frequency(const Dataset& train) {
  std::vector<uint64_t> freq(train.num_labels, 0);
  for (const uint32_t l : train.points.label_ids) ++freq[l];
  std::vector<uint32_t> order(train.num_labels);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return freq[a] > freq[b]; });
  return order;
}

// Centroids stored feature-major: for feature f, the (label, weight) pairs of every centroid that
// uses f, so scoring a sparse point touches only the labels it shares a feature with.
struct Postings {
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> labels;
  std::vector<float> weights;
};

Postings centroid_postings(const Dataset& train) {
  // Points of each label (CSR).
  std::vector<uint64_t> start(train.num_labels + 1, 0);
  for (const uint32_t l : train.points.label_ids) ++start[l + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<uint32_t> members(start.back());
  std::vector<uint64_t> fill(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < train.size(); ++i)
    for (const uint32_t l : train.points.labels_of(i)) members[fill[l]++] = i;

  struct Entry {
    uint32_t feature, label;
    float weight;
  };
  std::vector<Entry> entries;
  std::vector<float> dense(train.num_features, 0.0f);
  std::vector<uint32_t> touched;
  for (uint32_t l = 0; l < train.num_labels; ++l) {
    touched.clear();
    for (uint64_t m = start[l]; m < start[l + 1]; ++m) {
      const auto ids = train.points.features_of(members[m]);
      const auto vals = train.points.values_of(members[m]);
      for (size_t j = 0; j < ids.size(); ++j) {
        if (dense[ids[j]] == 0.0f) touched.push_back(ids[j]);
        dense[ids[j]] += vals[j];
        if (dense[ids[j]] == 0.0f) dense[ids[j]] = 1e-30f;  // keep it marked as touched
      }
    }
    double norm = 0.0;
    for (const uint32_t f : touched) norm += static_cast<double>(dense[f]) * dense[f];
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (const uint32_t f : touched) {
      entries.push_back({f, l, dense[f] * scale});
      dense[f] = 0.0f;
    }
  }
  Postings p;
  p.offsets.assign(train.num_features + 1, 0);
  for (const Entry& e : entries) ++p.offsets[e.feature + 1];
  std::partial_sum(p.offsets.begin(), p.offsets.end(), p.offsets.begin());
  p.labels.resize(entries.size());
  p.weights.resize(entries.size());
  std::vector<uint64_t> pos(p.offsets.begin(), p.offsets.end() - 1);
  for (const Entry& e : entries) {
    p.labels[pos[e.feature]] = e.label;
    p.weights[pos[e.feature]++] = e.weight;
  }
  return p;
}

struct Scratch {
  std::vector<float> scores;
  std::vector<uint32_t> touched;
};

}  // namespace

std::map<size_t, double> most_frequent_precision(const Dataset& train, const Dataset& test,
                                                 const std::vector<size_t>& ks) {
  check_compatible(train, test);
  PrecisionAtK metric(ks);
  const auto order = labels_by_frequency(train);
  std::vector<uint32_t> top;
  for (size_t i = 0; i < test.size(); ++i)
    for (size_t j = 0; j < metric.max_k(); ++j) top.push_back(j < order.size() ? order[j] : UINT32_MAX);
  metric.add(test.points, top);
  return metric.values();
}

std::map<size_t, double> label_centroid_precision(const Dataset& train, const Dataset& test,
                                                  const std::vector<size_t>& ks) {
  check_compatible(train, test);
  PrecisionAtK metric(ks);
  const size_t k = metric.max_k();
  const auto fallback = labels_by_frequency(train);
  std::vector<uint32_t> rank_of(train.num_labels);
  for (uint32_t r = 0; r < fallback.size(); ++r) rank_of[fallback[r]] = r;
  const Postings p = centroid_postings(train);
  std::vector<uint32_t> top(test.size() * k, UINT32_MAX);
  tbb::enumerable_thread_specific<Scratch> scratch([&] { return Scratch{std::vector<float>(train.num_labels, 0.0f), {}}; });
  tbb::parallel_for(tbb::blocked_range<size_t>(0, test.size(), 64), [&](const tbb::blocked_range<size_t>& r) {
    Scratch& s = scratch.local();
    for (size_t i = r.begin(); i < r.end(); ++i) {
      s.touched.clear();
      const auto ids = test.points.features_of(i);
      const auto vals = test.points.values_of(i);
      for (size_t j = 0; j < ids.size(); ++j) {
        for (uint64_t q = p.offsets[ids[j]]; q < p.offsets[ids[j] + 1]; ++q) {
          const uint32_t l = p.labels[q];
          if (s.scores[l] == 0.0f) s.touched.push_back(l);
          s.scores[l] += vals[j] * p.weights[q];
          if (s.scores[l] == 0.0f) s.scores[l] = 1e-30f;
        }
      }
      const auto better = [&](uint32_t a, uint32_t b) {
        return s.scores[a] != s.scores[b] ? s.scores[a] > s.scores[b] : rank_of[a] < rank_of[b];
      };
      const size_t m = std::min(k, s.touched.size());
      std::partial_sort(s.touched.begin(), s.touched.begin() + static_cast<std::ptrdiff_t>(m), s.touched.end(), better);
      uint32_t* out = top.data() + i * k;
      for (size_t j = 0; j < m; ++j) out[j] = s.touched[j];
      // Fewer than k labels share a feature with the point: the rest by training frequency.
      for (size_t j = m, f = 0; j < k && f < fallback.size(); ++f)
        if (s.scores[fallback[f]] == 0.0f) out[j++] = fallback[f];
      for (const uint32_t l : s.touched) s.scores[l] = 0.0f;
    }
  });
  metric.add(test.points, top);
  return metric.values();
}

}  // namespace frugal::data
