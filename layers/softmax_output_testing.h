// Test access to SoftmaxOutput (internal: not installed, not reachable from <frugal/frugal.h>).
#pragma once

#include "core/active_sets.h"
#include "layers/softmax_output.h"

namespace frugal::layers {

struct SoftmaxOutputTesting {
  // Train on these active sets instead of sampling (finite-difference checks need the set to stay
  // fixed while the input is perturbed). nullptr returns to sampling.
  static void override_active_sets(SoftmaxOutput& layer, const ActiveSets* active) { layer.override_ = active; }
};

}  // namespace frugal::layers
