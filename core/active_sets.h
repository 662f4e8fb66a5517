// ActiveSets: per-sample lists of neuron ids in CSR form, what an LSH sampler produces and what the
// active-set ops of a Backend (core/backend.h) consume: sample i's are ids[offsets[i] .. offsets[i+1]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace frugal {

struct ActiveSets {
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> ids;
  // Empty, or one value per id added to its logit before the softmax: the sampling-probability
  // correction of random negatives (0 for exact entries). It shifts the loss, not dLoss/dlogit's form.
  std::vector<float> logit_offsets;
  size_t num_samples() const { return offsets.size() - 1; }
  size_t total() const { return ids.size(); }
  void clear() {
    offsets.assign(1, 0);
    ids.clear();
    logit_offsets.clear();
  }
};

}  // namespace frugal
