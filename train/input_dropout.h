// Input-feature dropout (inverted): in training, each (point, feature) entry of the sparse input is
// dropped with probability p and the kept values are scaled by 1 / (1 - p), so the expected input
// is unchanged and evaluation uses the inputs as they are. A dropped entry is removed from the
// batch, not zeroed: its feature row then gets no gradient in that step, as if it were absent.
//
// The draw of entry (point, feature) depends only on (seed, step, global point index, feature id):
// every rank of a model-parallel group drops the same entries, data-parallel replicas drop what one
// process would, and runs repeat exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/sparse_batch.h"

namespace frugal::train {

struct InputDropout {
  float p = 0.0f;  // probability of dropping an entry, in [0, 1)
  uint64_t seed = 1;
  void validate() const;
};

// Writes `in` to `out` with entries dropped. Point i of `in` is point first + i * stride of the
// global batch (a data-parallel replica's share: first = replica, stride = replicas).
void drop_input_features(const SparseBatch& in, const InputDropout& dropout, uint64_t step, size_t first,
                         size_t stride, SparseBatch& out);

}  // namespace frugal::train
