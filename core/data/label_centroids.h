// Label centroids in input space: each label's centroid is the L2-normalized sum of its training
// points' feature vectors (as given: tf-idf for the GCIDE sets), and a point is scored against
// every label by cosine similarity. On few-shot label sets (a point or two per label) this simple
// ranker is hard to beat, so it is both a reference (core/data/reference_rankers.h) and the second
// member of `--infer ensemble` (train/ensemble_ranker.h), which blends it with the network.
//
// Stored feature-major (an inverted index: for feature f, the (label, weight) pairs of every
// centroid that uses f), so scoring a sparse point touches only the labels it shares a feature
// with. Its size is about the training set's nonzeros (8 bytes each): bytes() says how much.
//
// `frugal train --checkpoint DIR` keeps it next to the checkpoint (DIR/label_centroids.bin) when
// the run infers with the ensemble, so that `frugal predict` / `evaluate` score the same way
// without the training file (core/data/inverted_index.h's format: a damaged or truncated copy is
// refused, naming the file).
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

inline constexpr const char* kLabelCentroidsFile = "label_centroids.bin";

class LabelCentroids {
 public:
  // Per-thread work space of nearest(): a score per label, cleared after each point.
  struct Scratch {
    std::vector<float> scores;
    std::vector<uint32_t> touched;
  };

  LabelCentroids() = default;
  explicit LabelCentroids(const Dataset& train);

  size_t num_features() const { return index_.num_features(); }
  size_t num_labels() const { return index_.num_items(); }
  size_t entries() const { return index_.entries(); }
  size_t bytes() const { return index_.bytes(); }  // in memory

  // The labels sharing a feature with the point (ids, vals), with the point's dot product with
  // their centroid, unordered (scores[l] for l in touched; the caller clears them). Feature ids
  // at or above num_features() are ignored (a test file may name features no training point has).
  void accumulate(std::span<const uint32_t> ids, std::span<const float> vals, Scratch& s) const;
  // The (at most) n labels of highest positive cosine similarity to the point, best first (ties
  // by label id), as (cosine, label) in `out`.
  void nearest(std::span<const uint32_t> ids, std::span<const float> vals, size_t n, Scratch& s,
               std::vector<std::pair<float, uint32_t>>& out) const;
  Scratch scratch() const { return Scratch{std::vector<float>(num_labels(), 0.0f), {}}; }

  // DIR/label_centroids.bin, written atomically (DIR is created if needed).
  void save(const std::string& dir) const;
  // Throws frugal::Error naming the file when it is missing, not a regular file, truncated or
  // damaged (its checksum), or not a frugal centroid file.
  static LabelCentroids load(const std::string& dir);
  static bool exists(const std::string& dir);

 private:
  InvertedIndex index_;  // items: labels
};

}  // namespace frugal::data
