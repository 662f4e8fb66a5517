// Seeded reordering and train/test splitting of a Dataset. Repository files are often sorted by
// label, so a file must be shuffled before any prefix of it is representative; the split keeps
// every label of a test point present in training (a label seen only at test time cannot be
// learned, and would only measure the split).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dataset.h"

namespace frugal::data {

// A seeded permutation of 0..n-1 (Fisher-Yates over Rng(seed)).
std::vector<uint32_t> shuffled_order(size_t n, uint64_t seed);

// The points of `data` in the order of shuffled_order(data.size(), seed).
Dataset shuffle(const Dataset& data, uint64_t seed);

struct SplitOptions {
  double test_fraction = 0.2;
  uint64_t seed = 1;
  // Label-stratified: each label's points go to test in about the share test_fraction (a validation
  // split that scores every part of the label distribution as the whole does, rare labels included,
  // instead of whatever labels a random draw happens to hit).
  bool stratified = false;
  void validate() const;
};

struct Split {
  Dataset train, test;
  size_t wanted_test = 0;  // round(test_fraction * points): fewer land in test when labels are too rare
  // The points of `data` in each part (ascending for a stratified split; else in the shuffled order).
  std::vector<uint32_t> train_rows, test_rows;
};

// Visits the points in a seeded random order and moves a point to test while fewer than
// round(test_fraction * n) are there, unless one of its labels would then be left without a
// training point. Both parts keep the shuffled order; points without labels may go either way.
// Stratified: the points are visited grouped by their rarest label (in a seeded random order within
// a group and between groups of the same size) and every 1/test_fraction-th goes to test, with the
// same rule that no label loses its last training point (a refused point passes its turn to the
// next); both parts keep the data's order.
Split split(const Dataset& data, const SplitOptions& options);

}  // namespace frugal::data
