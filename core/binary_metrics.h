// Metrics of binary predictions (click-through models): the area under the ROC curve and the
// logistic loss. Labels are 0 or 1 (as floats, the way CtrBatch holds them); anything else, a
// length mismatch or a NaN score throws frugal::Error.
#pragma once

#include <span>

namespace frugal {

// Exact AUC: the probability that a random positive scores above a random negative, ties counting
// one half (the Mann-Whitney statistic with average ranks for tied scores). O(n log n). NaN when
// there is no positive or no negative: the AUC is then undefined, not 0.5.
double auc(std::span<const float> scores, std::span<const float> labels);

// Mean of -(y log p + (1 - y) log(1 - p)) in natural log; p is clamped to [1e-7, 1 - 1e-7] so that
// one confident mistake costs 16.1 rather than infinity. Probabilities outside [0, 1] throw.
// 0 for no samples.
double logloss(std::span<const float> probabilities, std::span<const float> labels);

}  // namespace frugal
