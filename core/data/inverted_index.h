// A feature-major index of sparse vectors ("items": label centroids, training points): for
// feature f, the (item, weight) pairs of every item that has f, items ascending. Scoring a sparse
// query against every item then touches only the items sharing a feature with it. What
// LabelCentroids and NearestPoints (core/data/label_centroids.h, nearest_points.h) are made of,
// with the file format they share: a frugal header, the arrays, and a CRC32C of everything before
// it at the end, so that a damaged or truncated copy is refused naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace frugal::data {

class InvertedIndex {
 public:
  InvertedIndex() = default;
  // entries: (feature, item, weight) in item order; features: the feature count.
  struct Entry {
    uint32_t feature, item;
    float weight;
  };
  InvertedIndex(size_t features, size_t items, const std::vector<Entry>& entries);

  size_t num_features() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  size_t num_items() const { return num_items_; }
  size_t entries() const { return items_.size(); }
  size_t bytes() const;

  // Adds vals[j] * weight to scores[item] for every item sharing feature ids[j] (features at or
  // above num_features() are ignored), listing each item touched once in `touched` (scores must
  // be 0 for items not yet touched; a sum that cancels to 0 stays marked as 1e-30).
  void accumulate(std::span<const uint32_t> ids, std::span<const float> vals, std::vector<float>& scores,
                  std::vector<uint32_t>& touched) const;

  // The arrays as bytes of the shared file format, and back (`name`: the file, for errors; a
  // forged size or an item id out of range throws).
  void write(std::ostream& out) const;
  void read(std::istream& in, uint64_t bytes_left, const std::string& name);

 private:
  uint64_t num_items_ = 0;
  std::vector<uint64_t> offsets_;  // per feature, into items_ / weights_
  std::vector<uint32_t> items_;
  std::vector<float> weights_;
};

// 1 / |v| (0 for a zero vector): what turns a query's dot products into cosines.
float inverse_norm(std::span<const float> v);
// Keeps the n best (score, id) pairs, best first (ties by id).
void keep_best(std::vector<std::pair<float, uint32_t>>& scored, size_t n);

}  // namespace frugal::data
