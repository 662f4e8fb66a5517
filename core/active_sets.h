// ActiveSets: per-sample lists of neuron ids in CSR form, what an LSH sampler produces and what the
// active-set ops of a Backend (core/backend.h) consume: sample i's are ids[offsets[i] .. offsets[i+1]).
// The sampler builds them in host memory (ActiveSets); the ops take them where the backend computes
// (ActiveTensors: views of the host vectors on a host backend, one set each on a device); the host
// kernels read an ActiveView.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace frugal {

// Active sets in host memory, as the host kernels read them.
struct ActiveView {
  std::span<const uint64_t> offsets;
  std::span<const uint32_t> ids;
  std::span<const float> logit_offsets;  // empty, or one per id
  size_t num_samples() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  size_t total() const { return ids.size(); }
};

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
  ActiveView view() const { return {offsets, ids, logit_offsets}; }
};

// Active sets as tensors in a backend's memory (u64 offsets, u32 ids, f32 logit offsets, each 1 x n):
// what active_logits, active_backward_input and row_accumulate take.
struct ActiveTensors {
  Tensor offsets{0, 0, Dtype::u64}, ids{0, 0, Dtype::u32}, logit_offsets{0, 0, Dtype::f32};
  size_t num_samples() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  size_t total() const { return ids.size(); }
  // a's sets where `backend` computes: on a host backend, views of a's own vectors (no copy: a must
  // outlive their use and not change meanwhile); on a device, one set each (the sets entering the
  // step, read there by every op that follows).
  void assign(const ActiveSets& a, Backend& backend);
  // The host kernels' view (host tensors only; throws naming the tensor otherwise).
  ActiveView host() const;
};

}  // namespace frugal
