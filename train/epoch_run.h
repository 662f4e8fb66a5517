// What the trainers' fit_epoch share (Trainer, PipelineTrainer, DlrmTrainer): the loader over this
// replica's share of the epoch, the loop of timed steps with the divergence rule, the check that the
// weights are finite after it, the bytes the steps put on the wire and the epoch's loss over every
// replica's points.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "core/comm_stats.h"
#include "core/data/batch_loader.h"
#include "core/dataset.h"
#include "core/progress.h"
#include "core/sparse_batch.h"
#include "core/work.h"
#include "train/divergence.h"
#include "train/trainer.h"

namespace frugal::train::epoch {

// The epoch's batches for this replica (every replica has the same data and takes its share of
// each global batch); null or a 1-rank group: all of it.
data::BatchLoader loader(const data::Dataset& data, const FitOptions& options, const comm::Communicator* replicas);

// Skips options.skip_steps batches, then runs step(batch, global batch size) (the batch's summed
// loss) on each batch up to options.max_steps, counting samples, steps and each step's compute
// time (its wall time less its waits for communication); after(loss so far) runs after every step
// (progress, the caller's own counts). Returns the summed loss. A step whose loss is not finite
// (train/divergence.h): with skip_batch the step did not update (the trainer dropped its gradients)
// and is counted in result.skipped_batches, its points left out of the loss and samples; with stop
// it ends the run here when the step's loss is the whole batch's, else at finish.
// `Loader`: data::BatchLoader (sparse batches) or CtrBatches (DLRM's click samples): a Batch type,
// next(batch, &global) and Loader::points(batch), the points this rank's part holds.
// A step's loss rounded to a multiple of 2^-20: sums of such values are exact in a double (up to
// 2^33), so an epoch trained in parts (--checkpoint-every, --valid-every) reports the bits of the
// same epoch trained whole, whatever the order the parts' sums are added in.
inline double exactly_summable(double loss) {
  constexpr double kScale = 1048576.0;  // 2^20
  return std::abs(loss) < 8589934592.0 ? std::round(loss * kScale) / kScale : loss;
}

template <class Loader, class Step, class After>
double run_steps(Loader& loader, const FitOptions& options, FitResult& result, const DivergencePolicy& divergence,
                 Step&& step, After&& after) {
  typename Loader::Batch batch;
  size_t global = 0;
  double loss_sum = 0.0;
  for (size_t skipped = 0; skipped < options.skip_steps && loader.next(batch, &global); ++skipped) {
  }
  while ((options.max_steps == 0 || result.steps < options.max_steps) && loader.next(batch, &global)) {
    const double waited_before = comm::waited_seconds();
    const auto step_start = std::chrono::steady_clock::now();
    const double loss = step(batch, global);
    result.compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count() -
                              (comm::waited_seconds() - waited_before);
    ++result.steps;
    if (!std::isfinite(loss)) {
      if (result.diverged_step == 0) result.diverged_step = options.skip_steps + result.steps;
      if (divergence.on == OnDivergence::skip_batch) {
        ++result.skipped_batches;
        after(loss_sum);
        continue;
      }
      if (divergence.step_loss_is_global)
        throw_divergence(divergence_where(divergence.epoch, result.diverged_step), "training loss", loss, divergence.lr);
    }
    loss_sum += exactly_summable(loss);
    result.samples += Loader::points(batch);
    after(loss_sum);
  }
  return loss_sum;
}

// The bytes of the epoch's steps: model-parallel `mp` and data-parallel `dp` (what the groups'
// counts grew by).
void add_traffic(FitResult& result, const comm::ByteCount& mp, const comm::ByteCount& dp);

// After an epoch: every weight of the model is finite and each parameter's L2 norm within
// kDivergedWeight (1e15: healthy weights stay within a few units, and beyond it a logit overflows),
// on every rank of `groups` (each group's ranks
// agree, and the groups together cover the run: model slices, pipeline stages, replicas), or every
// rank throws DivergenceError. The loss misses a last step that moved weights to infinity after its
// loss was computed, and a NaN that a ReLU hides forward but the backward pass carries into a
// weight: such a model must never be evaluated, saved or returned. One sum of squares per parameter,
// computed where the weights are (a device sends one number each).
inline constexpr float kDivergedWeight = 1e15f;  // see require_finite_weights
void require_finite_weights(const std::vector<Parameter*>& params, std::initializer_list<comm::Communicator*> groups,
                            const DivergencePolicy& divergence);

// The epoch's loss, samples and samples/s over every replica's points (result.samples: this
// replica's until then; group_samples keeps them). A loss that is not finite over all ranks, or
// an epoch whose every batch was skipped, stops the run (DivergenceError) on every rank together.
void finish(FitResult& result, double loss_sum, comm::Communicator* replicas, const DivergencePolicy& divergence);

}  // namespace frugal::train::epoch
