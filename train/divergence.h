// What a training step whose loss is not finite (NaN or infinity: a learning rate too high for the
// data, feature values too large or not finite) does to the run (issue 62, `--on-divergence`):
//  - stop (the default): the run ends with an error naming the epoch, the step and the likely
//    causes, before the epoch's checkpoint is written, so the last good checkpoint stays the
//    newest; a model that went NaN is never saved or returned.
//  - skip_batch: the batch's update is not applied (its gradients are dropped), the run goes on,
//    and the epoch reports how many batches it skipped; an epoch whose every batch diverged
//    stops the run all the same.
// Each trainer (plain, pipeline, DLRM) asks these functions, so the check and its words live once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"

namespace frugal::train {

enum class OnDivergence { stop, skip_batch };

std::string_view to_string(OnDivergence d);

// The error a diverged run stops with (a frugal::Error, so every face reports it as any other).
class DivergenceError : public Error {
 public:
  using Error::Error;
};

// How a trainer applies the policy in its epoch loop (train/epoch_run.h).
struct DivergencePolicy {
  OnDivergence on = OnDivergence::stop;
  // Whether this rank's step loss is its whole batch's: every rank of a model-parallel group
  // computes the same one (the normalizer is all-gathered), so the group stops at the step itself,
  // together. Replicas (each its share of the batch) and pipeline stages (only the last knows the
  // loss) stop together at the epoch's end instead, on the loss summed over all ranks.
  bool step_loss_is_global = true;
  uint64_t epoch = 1;  // 1-based, for the message
  double lr = 0.0;     // the learning rate, for the message (0: not known)
};

// "epoch E, step S" (step 0: "epoch E").
std::string divergence_where(uint64_t epoch, uint64_t step);

// Throws DivergenceError: `where` diverged (`what` = "training loss", "gradient norm") at `value`,
// with the likely causes and what to do.
[[noreturn]] void throw_divergence(const std::string& where, std::string_view what, double value, double lr);
// The same with the finding said whole ("the model's weights (x) are not all finite").
[[noreturn]] void throw_divergence_finding(const std::string& where, std::string_view finding, double lr);

}  // namespace frugal::train
