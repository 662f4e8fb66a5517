// A seeded, click-stratified split of a click log: the validation share a DLRM run holds back from
// its training set (train/run/validation_plan.h). Stratified by the label so the held-back part has
// the training set's click rate (AUC on a part with too few clicks is noisy, and a random draw of
// 5% from a set with a 3% click rate can miss it by a tenth).
#pragma once

#include <cstdint>
#include <vector>

#include "core/data/ctr_format.h"

namespace frugal::data {

struct CtrSplit {
  CtrDataset train, test;
  // The samples of the data in each part, ascending (both parts keep the data's order).
  std::vector<uint32_t> train_rows, test_rows;
};

// The clicks, then the other samples, each in the order of a seeded permutation; every
// 1/test_fraction-th of that order (from a seeded offset) goes to test. test_fraction in [0, 1).
CtrSplit split_ctr(const CtrDataset& data, double test_fraction, uint64_t seed);

}  // namespace frugal::data
