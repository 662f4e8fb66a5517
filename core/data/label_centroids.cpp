#include "core/data/label_centroids.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/checked_file.h"

namespace frugal::data {
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'T'};
constexpr uint32_t kVersion = 1;
}  // namespace

LabelCentroids::LabelCentroids(const Dataset& train) {
  // Points of each label (CSR).
  std::vector<uint64_t> start(train.num_labels + size_t{1}, 0);
  for (const uint32_t l : train.points.label_ids) ++start[l + size_t{1}];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<uint32_t> members(start.back());
  std::vector<uint64_t> fill(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < train.size(); ++i)
    for (const uint32_t l : train.points.labels_of(i)) members[fill[l]++] = i;

  // Each centroid summed densely over the features its points touch, then normalized.
  std::vector<InvertedIndex::Entry> entries;
  std::vector<float> dense(train.num_features, 0.0f);
  std::vector<uint8_t> seen(train.num_features, 0);
  std::vector<uint32_t> touched;
  for (uint32_t l = 0; l < train.num_labels; ++l) {
    touched.clear();
    for (uint64_t m = start[l]; m < start[l + 1]; ++m) {
      const auto ids = train.points.features_of(members[m]);
      const auto vals = train.points.values_of(members[m]);
      for (size_t j = 0; j < ids.size(); ++j) {
        if (seen[ids[j]] == 0) {
          seen[ids[j]] = 1;
          touched.push_back(ids[j]);
        }
        dense[ids[j]] += vals[j];
      }
    }
    double norm = 0.0;
    for (const uint32_t f : touched) norm += static_cast<double>(dense[f]) * dense[f];
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (const uint32_t f : touched) {
      if (dense[f] != 0.0f) entries.push_back({f, l, dense[f] * scale});
      dense[f] = 0.0f;
      seen[f] = 0;
    }
  }
  index_ = InvertedIndex(train.num_features, train.num_labels, entries);
}

void LabelCentroids::accumulate(std::span<const uint32_t> ids, std::span<const float> vals, Scratch& s) const {
  index_.accumulate(ids, vals, s.scores, s.touched);
}

void LabelCentroids::nearest(std::span<const uint32_t> ids, std::span<const float> vals, size_t n, Scratch& s,
                             std::vector<std::pair<float, uint32_t>>& out) const {
  s.touched.clear();
  accumulate(ids, vals, s);
  const float inv = inverse_norm(vals);
  out.clear();
  for (const uint32_t l : s.touched) {
    const float cosine = s.scores[l] * inv;
    if (cosine > 0.0f) out.emplace_back(cosine, l);
    s.scores[l] = 0.0f;
  }
  keep_best(out, n);
}

void LabelCentroids::save(const std::string& dir) const {
  save_checked_file(dir, kLabelCentroidsFile, kMagic, kVersion, [&](std::ostream& out) { index_.write(out); });
}

bool LabelCentroids::exists(const std::string& dir) {
  return std::filesystem::exists(std::filesystem::path(dir) / kLabelCentroidsFile);
}

LabelCentroids LabelCentroids::load(const std::string& dir) {
  const std::string name = (std::filesystem::path(dir) / kLabelCentroidsFile).string();
  const std::string bytes = load_checked_file(dir, kLabelCentroidsFile, kMagic, kVersion, "a frugal label-centroid file");
  std::istringstream in(bytes, std::ios::binary);
  LabelCentroids c;
  c.index_.read(in, bytes.size(), name);
  return c;
}

}  // namespace frugal::data
