// --infer ensemble's blend chosen on the validation set: the network's share against the label
// centroids' and the nearest training points', and the members' temperature, from a small grid,
// by P@1 + P@5 of the validation points. One fixed set of shares was 0.4 points of P@1 below kNN on
// GCIDE full and 0.8-1.1 below the label centroid on the synthetic few-shot sets (bench/REPORT.md,
// "Ensemble inference"): how much each member is worth depends on the data and on how far the
// network has learnt it, so it is chosen per run and per epoch. The choice costs no training: the
// members' candidates of every validation point are computed once (they do not depend on the
// network), the network's once per epoch, and each blend of the grid is a merge of those lists. A
// blend replaces the base one only when it is better by more than the validation points' noise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dataset.h"
#include "train/ensemble_ranker.h"

namespace frugal::train {

class Trainer;

// How many standard errors of the paired per-point difference a blend must beat the base blend by
// (on P@1 + P@5 of the validation points) to be chosen instead.
inline constexpr double kMinStandardErrors = 2.0;

// The blends tried (temperatures x shares with the network's share >= 0), `base` first. A member
// that `base` gives no weight is only tried at weight 0 when `members` lacks it.
std::vector<EnsembleOptions> ensemble_grid(const EnsembleOptions& base, const EnsembleMembers& members);

struct EnsembleScore {
  EnsembleOptions options;
  size_t index = 0;  // in the grid (0: the base blend)
  double p1 = 0.0, p5 = 0.0;
  double score() const { return p1 + p5; }
};

class EnsembleChoice {
 public:
  // `members`: both rankers (a member left null is not tried); `valid`: the validation set.
  EnsembleChoice(const EnsembleMembers& members, const EnsembleOptions& base, const data::Dataset& valid, size_t batch);
  // Scores every blend of the grid with `trainer`'s network (collective over its model group, as
  // Trainer::predict is) and returns the one with the best P@1 + P@5 among those that beat `base` by
  // more than kMinStandardErrors standard errors of the per-point difference (none: `base`; ties:
  // the earlier in the grid), and `base`'s own score in `base_score`.
  EnsembleScore choose(Trainer& trainer, EnsembleScore* base_score = nullptr);
  size_t blends() const { return grid_.size(); }
  const EnsembleOptions& blend(size_t index) const { return grid_.at(index); }

 private:
  const data::Dataset& valid_;
  size_t batch_;
  size_t candidates_;
  std::vector<EnsembleOptions> grid_;
  std::vector<MemberLists> lists_;  // per validation point
};

}  // namespace frugal::train
