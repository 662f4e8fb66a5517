// Gradient-norm clipping over the whole model: the L2 norm is taken over every parameter's
// gradient of the whole (possibly sliced) model, so every rank of a model-parallel group scales by
// the same factor. Call it after the sum over data-parallel replicas (their gradients are then
// equal, so each replica computes the same norm without communicating).
#pragma once

#include <cstddef>
#include <vector>

#include "core/parameter.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {


// The global gradient norm ||g||. A parameter sliced over `model_group` contributes each rank's
// slice; one that is not sliced is the same on every rank and is counted once (on rank 0). Each
// rank sums its squares in a fixed order in double; the group's sums are gathered and added in rank
// order, so every rank gets the same bits. Collective over model_group (null or 1 rank: local).
// `disjoint_group`: ranks that hold other parameters of the same model (pipeline stages), whose
// sums are added too (collective over it as well). Every trainer clips through this one function
// (the XMC and MLP Trainer, the PipelineTrainer, the DlrmTrainer).
double global_gradient_norm(const std::vector<Parameter*>& params, comm::Communicator* model_group,
                            comm::Communicator* disjoint_group = nullptr);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1 (PyTorch's
// clip_grad_norm_); returns the norm before clipping.
double clip_gradient_norm(const std::vector<Parameter*>& params, float max_norm, comm::Communicator* model_group,
                          comm::Communicator* disjoint_group = nullptr);

// An epoch's clipping record, kept alike by every trainer: the mean gradient norm over its steps and
// the steps whose norm clipping scaled down (the metrics log's grad_norm and clipped_fraction).
struct ClipTally {
  double norm_sum = 0.0;
  size_t steps = 0, clipped = 0;
  // One step's norm (0 when it was not computed) under the limit (0: no clipping).
  void add(double norm, double limit) {
    norm_sum += norm;
    ++steps;
    if (limit > 0.0 && norm + 1e-6 > limit) ++clipped;
  }
  double mean_norm() const { return steps > 0 ? norm_sum / static_cast<double>(steps) : 0.0; }
  double clipped_fraction() const { return steps > 0 ? static_cast<double>(clipped) / static_cast<double>(steps) : 0.0; }
};

}  // namespace frugal::train
