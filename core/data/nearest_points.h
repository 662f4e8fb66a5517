// The training points themselves as a ranker (k nearest neighbours): every training point's
// feature vector, L2-normalized, in an inverted index (core/data/inverted_index.h), with its
// labels. A query's `neighbours` most similar points (cosine > 0, ties by point id) vote for
// their labels with their similarity; labels rank by their summed votes. Where a label's training
// points differ (a word's several senses in GCIDE), this keeps each of them, which a centroid
// blurs: on GCIDE full it is the strongest reference (README, tuning guide). Both the kNN
// reference (core/data/reference_rankers.h) and the third member of `--infer ensemble`
// (train/ensemble_ranker.h) use it. Its size is about the training set's nonzeros (8 bytes each)
// plus 4 bytes a label occurrence; `frugal train --checkpoint DIR` keeps it in
// DIR/nearest_points.bin when the ensemble gives it weight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/data/inverted_index.h"
#include "core/dataset.h"

namespace frugal::data {

inline constexpr const char* kNearestPointsFile = "nearest_points.bin";

class NearestPoints {
 public:
  // Per-thread work space: a similarity per training point and a vote per label, cleared after
  // each query.
  struct Scratch {
    std::vector<float> sims, votes;
    std::vector<uint32_t> touched, voted;
    std::vector<std::pair<float, uint32_t>> best;  // (similarity, point), most similar first
  };

  NearestPoints() = default;
  explicit NearestPoints(const Dataset& train);

  size_t num_points() const { return index_.num_items(); }
  size_t num_labels() const { return num_labels_; }
  size_t bytes() const { return index_.bytes() + (label_offsets_.size() * 8 + label_ids_.size() * 4); }
  std::span<const uint32_t> labels_of(uint32_t point) const {
    return {label_ids_.data() + label_offsets_[point], label_ids_.data() + label_offsets_[point + 1]};
  }
  Scratch scratch() const;

  // s.best: the (at most) n training points most similar to the query (cosine > 0), best first.
  void nearest(std::span<const uint32_t> ids, std::span<const float> vals, size_t n, Scratch& s) const;
  // The labels of the query's `neighbours` nearest points with their summed similarities, best
  // first (ties by label id), at most `labels` of them, as (votes, label) in `out`.
  void vote(std::span<const uint32_t> ids, std::span<const float> vals, size_t neighbours, size_t labels, Scratch& s,
            std::vector<std::pair<float, uint32_t>>& out) const;

  void save(const std::string& dir) const;  // DIR/nearest_points.bin
  static NearestPoints load(const std::string& dir);
  static bool exists(const std::string& dir);

 private:
  InvertedIndex index_;  // items: training points, L2-normalized
  uint64_t num_labels_ = 0;
  std::vector<uint64_t> label_offsets_;  // per point, into label_ids_
  std::vector<uint32_t> label_ids_;
};

}  // namespace frugal::data
