// The standard extreme-classification network: sparse input -> hidden (ReLU) -> softmax over the
// labels, trained with LSH-sampled or exact softmax. What `frugal train` builds, and a shortcut for
// programs and tests that want the same network.
#pragma once

#include <cstdint>

#include "core/model.h"
#include "core/rng.h"
#include "layers/softmax_output.h"
#include "layers/sparse_dense.h"

namespace frugal::layers {

struct XmcNetworkOptions {
  size_t features = 0;
  size_t labels = 0;
  size_t hidden = 128;
  Sampler sampler = Sampler::lsh;
  lsh::LshOptions lsh{};
  uint64_t seed = 1;
  Placement placement{};  // both layers sliced over this group (or replicated)
  // Storage of the sparse input layer's and the LSH softmax's weights (and their optimizer
  // moments): f32, or bf16 (`--precision bf16`). Dense hidden layers and an exact softmax stay f32.
  Dtype precision = Dtype::f32;
};

inline void build_xmc_network(Model& model, const XmcNetworkOptions& o) {
  const Rng seeds(o.seed);
  model.add<SparseDense>(SparseDense::Options{.in = o.features, .out = o.hidden, .act = Act::relu,
                                              .seed = seeds.split(1).next_u64(), .placement = o.placement,
                                              .storage = o.precision});
  model.add<SoftmaxOutput>(SoftmaxOutput::Options{.in = o.hidden, .out = o.labels, .sampler = o.sampler,
                                                  .lsh = o.lsh, .seed = seeds.split(2).next_u64(),
                                                  .placement = o.placement, .storage = o.precision});
}

}  // namespace frugal::layers
