// Gradient-norm clipping over the whole model: the L2 norm is taken over every parameter's
// gradient of the whole (possibly sliced) model, so every rank of a model-parallel group scales by
// the same factor. Call it after the sum over data-parallel replicas (their gradients are then
// equal, so each replica computes the same norm without communicating).
#pragma once

#include <vector>

#include "core/parameter.h"

namespace frugal {

namespace comm {
class Communicator;
}

// The global gradient norm ||g||. A parameter sliced over `model_group` contributes each rank's
// slice; one that is not sliced is the same on every rank and is counted once (on rank 0). Each
// rank sums its squares in a fixed order in double; the group's sums are gathered and added in rank
// order, so every rank gets the same bits. Collective over model_group (null or 1 rank: local).
double global_gradient_norm(const std::vector<Parameter*>& params, comm::Communicator* model_group);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1 (PyTorch's
// clip_grad_norm_); returns the norm before clipping.
double clip_gradient_norm(const std::vector<Parameter*>& params, float max_norm, comm::Communicator* model_group);

}  // namespace frugal
