// Summary statistics of a Dataset: what `frugal data stats` and `frugal data gcide` print. The
// label-frequency histogram shows the long tail that makes extreme classification hard; the
// adjacent-label share shows a file sorted by label (as some repository files are), which must be
// shuffled before a prefix or a sequential split of it means anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dataset.h"

namespace frugal::data {

struct HistogramBin {
  uint64_t lo = 0, hi = 0;  // labels occurring in lo..hi points
  size_t labels = 0;
};

struct DatasetStats {
  size_t points = 0, features = 0, labels = 0;  // as declared
  size_t features_used = 0, labels_used = 0;    // ids occurring at least once
  double average_nonzeros = 0, average_labels = 0;
  size_t points_without_labels = 0, points_without_features = 0;
  uint64_t max_label_frequency = 0;
  double adjacent_same_label = 0;  // share of neighbouring points whose first labels are equal
  // The training points behind a typical label occurrence: the median, over every (point, label)
  // pair, of that label's point count. A long tail of one-point labels that carries little of the
  // data's label mass keeps it high (the synthetic sets: ~16-64); a set whose points mostly belong
  // to labels with a handful of points (few-shot: GCIDE ~1-8) has it low.
  uint64_t median_label_support = 0;
  // Share of the label occurrences whose label has at most 2 training points.
  double rare_label_share = 0;
  std::vector<HistogramBin> label_histogram;  // bins 0, 1, 2, 3-4, 5-8, ... up to the most frequent label

  bool looks_sorted() const { return adjacent_same_label > 0.5; }
  // Human-readable, one fact a line, each line starting with `indent`.
  std::string format(const std::string& indent = "") const;
};

DatasetStats compute_stats(const Dataset& data);
// The statistics that follow from the label counts alone (`label_freq`: the points of each label
// that occurs, any order): max_label_frequency, labels_used, label_histogram (s.labels set),
// median_label_support, rare_label_share. What compute_stats ends with, and what a streamed set's
// statistics are made of (core/data/point_stream.h: counts recorded in its packed file).
void add_label_stats(DatasetStats& s, const std::vector<uint64_t>& label_freq);

}  // namespace frugal::data
