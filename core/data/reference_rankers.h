// Simple predictors that set the yardstick for a trained extreme classifier on a data set:
//  - most frequent: every test point gets the labels with the most training points, in that order;
//  - label centroid: each label is the normalized sum of its training points' feature vectors; a
//    test point's labels are ranked by cosine similarity to those centroids (ties, including all
//    labels it shares no feature with, by training frequency);
//  - k nearest neighbours: the `neighbours` (10) training points of highest cosine similarity to
//    the test point (feature vectors as given, L2-normalized; only positive similarities) vote
//    for their labels with their similarity; labels are ranked by their summed votes (ties, and
//    labels no neighbour has, by training frequency). An inverted index over the features makes
//    each test point cost the postings of its own features only; test points run in parallel, and
//    the result does not depend on the thread count.
// Each reports P@k over the test set exactly as Trainer::evaluate does (PrecisionAtK).
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

std::map<size_t, double> knn_precision(const Dataset& train, const Dataset& test, const std::vector<size_t>& ks,
                                       size_t neighbours = 10);

}  // namespace frugal::data
