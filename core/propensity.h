// Label propensities for the propensity-scored metrics PSP@k and PSnDCG@k (Jain, Prabhu & Varma,
// KDD 2016): the chance that a relevant label is observed at all. Rare labels are more often
// missing from the ground truth, so a hit on one is worth more (1/p_l). From the training label
// counts: p_l = 1 / (1 + C (N_l + B)^-A), C = (ln N - 1) (B + 1)^A, N training points, N_l those
// with label l. A = 0.55, B = 1.5 are the XMC repository's values for most sets (it uses 0.5/0.4
// for Wikipedia-LSHTC, 0.6/2.6 for the Amazon sets).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dataset.h"

namespace frugal {

// How many training points carry each label, and how many points there are (labels beyond the
// vector count as never seen).
struct LabelCounts {
  uint64_t points = 0;
  std::vector<uint64_t> per_label{};
  static LabelCounts of(const data::Dataset& train);
  // Adds the labels of a batch of training points (for readers that stream the file).
  void add(const SparseBatch& batch);
};

struct PropensityOptions {
  double a = 0.55;
  double b = 1.5;
  void validate() const;
};

class Propensities {
 public:
  Propensities(const LabelCounts& counts, const PropensityOptions& options = {});
  // 1/p_l: the weight of a hit on label l.
  double inverse(uint32_t label) const;
  double propensity(uint32_t label) const { return 1.0 / inverse(label); }
  const PropensityOptions& options() const { return options_; }
  // 1/p of the labels that have training counts (inverse(l) for l below its size), and of any other.
  const std::vector<double>& inverse_by_label() const { return inverse_; }
  double unseen_inverse() const { return unseen_; }

 private:
  PropensityOptions options_;
  double c_ = 0.0;
  std::vector<double> inverse_;
  double unseen_ = 1.0;  // 1/p of a label with no training point
};

}  // namespace frugal
