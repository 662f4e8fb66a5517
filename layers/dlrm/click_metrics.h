// Click-through metrics over a whole evaluation set: AUC (the probability that a random click is
// scored above a random non-click; tied scores count one half, by average ranks) and logloss (the
// mean logistic loss of the probabilities, each clamped to [1e-7, 1 - 1e-7] as scikit-learn does).
#pragma once

#include <span>

namespace frugal::layers {

struct ClickMetrics {
  double auc = 0.5;   // 0.5 when the set has only clicks or only non-clicks (undefined: no ranking)
  double logloss = 0;
  size_t samples = 0, clicks = 0;
};

ClickMetrics click_metrics(std::span<const float> probabilities, std::span<const float> labels);

}  // namespace frugal::layers
