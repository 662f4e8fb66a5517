// Slice weights from measured speed (`frugal train --slice-weights auto`; Poplar / Whale style):
// every rank of a model-parallel group times its compute per step on its slice over a few
// calibration steps, the times are gathered, and each rank's new share of the neurons is
// proportional to its throughput (its current share / its step time), capped by what its memory
// holds and at least a minimum share, or none at all: a rank so slow that its minimum share or its
// exchanges would lengthen the group's step is left out (an empty slice). The model and the trainer
// are then resliced in place through a checkpoint, exactly what --resume does onto other weights.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"
#include "train/trainer.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {


struct RebalanceOptions {
  // The smallest share of the neurons a rank that holds any keeps (a fraction of all of them): a
  // slice too thin to pay for its per-step overheads is raised to this, unless leaving the rank out
  // (an empty slice) gives the shorter step.
  double min_share = 0.05;
  // Whether a rank may be left out; false: every rank keeps at least min_share (the rule before
  // empty slices existed).
  bool leave_out_slow = true;
  // Rank 0 is never left out (it prints, logs and writes the manifest for its group): put the
  // fastest node first. False: any rank may be.
  bool keep_first = true;
  // Seconds per step the group waited on its exchanges with every rank in it (the least any member
  // waited: the slowest member waits only for the wire). A candidate group of k of the n ranks is
  // charged exchange_seconds * (k - 1) / (n - 1): nothing alone, all of it with every rank (the
  // ranks left out leave the exchanges, see reslice's Regroup). 0: exchanges not counted.
  double exchange_seconds = 0;
  // Per rank: the largest share its memory holds (empty: no cap; the CPU backend reports none).
  std::vector<double> max_share;
};

struct RebalancePlan {
  std::vector<double> weights;     // the new shares, summing to 1
  std::vector<double> throughput;  // current share / step seconds, per rank (relative units)
  std::vector<bool> raised;        // raised to min_share
  std::vector<bool> capped;        // lowered to its max_share
  std::vector<bool> left_out;      // given no share: holds no neurons of any sliced layer
  // Seconds per step predicted at the new weights: the slowest member's compute (share /
  // throughput), plus the kept ranks' part of RebalanceOptions::exchange_seconds.
  double predicted_step_seconds = 0;
};

// The pure weighting: shares proportional to current_weights[r] / step_seconds[r] (current_weights
// empty: equal), then clamped to [min_share, max_share[r]] with the rest shared among the others in
// proportion (water-filling). With leave_out_slow, this is done for the k fastest ranks, k = 1..n
// (with keep_first: rank 0 and the k - 1 fastest others),
// and the k whose predicted step (the slowest member's compute, plus its part of exchange_seconds)
// is the shortest wins (ties: the larger k); the
// others get 0. A rank whose current weight is 0 holds nothing, was measured on nothing, and stays
// out. Deterministic: the same inputs give the same bits on every rank. Throws when a time is not
// positive and finite (0 is allowed for a rank holding nothing) or the bounds cannot be met.
RebalancePlan throughput_weights(std::span<const double> step_seconds, std::span<const double> current_weights = {},
                                 const RebalanceOptions& options = {});

// Every model rank's step seconds, indexed by its rank in `model`, the same on every rank of the
// run: all-gathered over `model` and the largest over the replicas of `data` (replicas must keep
// the same slicing). Either group may be null.
std::vector<double> gather_step_seconds(double mine, comm::Communicator* model, comm::Communicator* data);

// The group's exchange seconds per step (RebalanceOptions::exchange_seconds): each model rank's
// communication wait per step gathered (the largest over replicas), the least of them.
double gather_exchange_seconds(double mine, comm::Communicator* model, comm::Communicator* data);

// The largest share of the model a rank's memory holds, from what it holds now: its model state
// (weights and optimizer state) grows in proportion to its share, so with `state_bytes` at share
// `share` and `available_bytes` more that it may take (Backend::state_memory_available()), of which
// `headroom` is used (the rest is left for activations, LSH tables and the reslicing itself):
//   cap = share * (state_bytes + headroom * available_bytes) / state_bytes, at most 1.
// Counting every parameter as sliced overstates a share's cost (unsliced layers do not grow with
// it), so the cap errs low. Unknown memory (nullopt) or no state yet: 1 (no cap).
double memory_cap(double share, double state_bytes, std::optional<double> available_bytes, double headroom = 0.8);

// Every model rank's memory cap (as gather_step_seconds gathers times; the smallest over replicas).
std::vector<double> gather_memory_caps(double mine, comm::Communicator* model, comm::Communicator* data);

// Bytes of model state a trainer's rank holds: its parameters' values and their optimizer state.
double model_state_bytes(const Model& model, const Trainer& trainer);

// Reslices `model` and `trainer` onto `weights` without losing anything the optimizer or the
// schedule holds: saves a checkpoint of them in `scratch_dir` (every rank of the run must see that
// folder: one host, or a shared file system), empties the model and calls build(model, weights),
// which must add the same layers sliced over the same group with those weights, remakes the
// trainer with its options, and loads the checkpoint (weights and optimizer state resliced; LSH
// tables rebuilt at the next step; DCT-DP residuals start empty). Collective over the whole run.
// Removes nothing: the caller owns scratch_dir.
//
// With `regroup`, the ranks left out leave the model group: every rank saves as above, then a rank
// with regroup->leave empties its model and trainer and returns (it trains no more), and the others
// build onto `weights` (theirs only, in the order of regroup->model, the new model group that
// `build` must slice over) and train with regroup->model as the trainer's model group.
struct Regroup {
  bool leave = false;
  comm::Communicator* model = nullptr;
};
void reslice(const std::string& scratch_dir, Model& model, std::optional<Trainer>& trainer,
             const std::function<void(Model&, const std::vector<double>&)>& build, const std::vector<double>& weights,
             const Regroup* regroup = nullptr);

}  // namespace frugal::train
