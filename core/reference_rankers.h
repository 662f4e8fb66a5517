// Two simple predictors that set the yardstick for a trained extreme classifier on a data set:
//  - most frequent: every test point gets the labels with the most training points, in that order;
//  - label centroid: each label is the normalized sum of its training points' feature vectors; a
//    test point's labels are ranked by cosine similarity to those centroids (ties, including all
//    labels it shares no feature with, by training frequency).
// Both report P@k over the test set exactly as Trainer::evaluate does (PrecisionAtK).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "core/dataset.h"

namespace frugal::data {

std::map<size_t, double> most_frequent_precision(const Dataset& train, const Dataset& test,
                                                 const std::vector<size_t>& ks);

std::map<size_t, double> label_centroid_precision(const Dataset& train, const Dataset& test,
                                                  const std::vector<size_t>& ks);

}  // namespace frugal::data
