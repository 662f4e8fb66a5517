// A multi-layer perceptron over sparse (or sparsely stored dense) input: SparseDense(features ->
// hidden[0], ReLU) -> Dense(hidden[i-1] -> hidden[i], ReLU) ... -> SoftmaxOutput(labels). What
// `frugal train --layers W1,W2,...` builds; with one hidden width it is the XMC network of
// xmc_network.h, initialized identically for the same seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/rng.h"
#include "layers/dense.h"
#include "layers/softmax_output.h"
#include "layers/sparse_dense.h"

namespace frugal::layers {

struct MlpNetworkOptions {
  size_t features = 0;
  size_t labels = 0;
  std::vector<size_t> hidden{128};  // widths of the hidden layers, input side first
  Sampler sampler = Sampler::exact;
  lsh::LshOptions lsh{};
  uint64_t seed = 1;
  // Every layer sliced by neurons over this group, as in the XMC network: between two layers the
  // trainer all-gathers the activations (DCT-MP: the top-k of each slice) and reduce-scatters
  // their gradients.
  Placement placement{};
  // Storage of the sparse input layer's and the LSH softmax's weights (and their optimizer
  // moments): f32, or bf16 (`--precision bf16`). Dense hidden layers and an exact softmax stay f32.
  Dtype precision = Dtype::f32;
  // A pipeline stage (`frugal train --pipeline S`): only layers [first_layer, end_layer) of the
  // network are built (0: the input layer, hidden.size(): the output layer), each initialized as in
  // the whole network, so that S stages start from the weights one rank would.
  size_t first_layer = 0, end_layer = SIZE_MAX;
};

// Layers of the MLP: the input layer, a dense layer per further hidden width, the output layer.
inline size_t mlp_layer_count(const MlpNetworkOptions& o) { return o.hidden.size() + 1; }

inline void build_mlp_network(Model& model, const MlpNetworkOptions& o) {
  FRUGAL_CHECK(!o.hidden.empty(), "an MLP needs at least one hidden layer");
  const Rng seeds(o.seed);
  const auto wanted = [&](size_t layer) { return layer >= o.first_layer && layer < o.end_layer; };
  FRUGAL_CHECK(o.first_layer < std::min(o.end_layer, mlp_layer_count(o)), "an MLP stage needs at least one layer");
  if (wanted(0))
    model.add<SparseDense>(SparseDense::Options{.in = o.features, .out = o.hidden[0], .act = Act::relu,
                                              .seed = seeds.split(1).next_u64(), .placement = o.placement,
                                              .storage = o.precision});
  for (size_t i = 1; i < o.hidden.size(); ++i)
    if (wanted(i))
      model.add<Dense>(Dense::Options{.in = o.hidden[i - 1], .out = o.hidden[i], .act = Act::relu,
                                    .seed = seeds.split(100 + i).next_u64(), .placement = o.placement});
  // split(2) for the output keeps a one-hidden-layer MLP identical to build_xmc_network.
  if (wanted(o.hidden.size()))
    model.add<SoftmaxOutput>(SoftmaxOutput::Options{.in = o.hidden.back(), .out = o.labels, .sampler = o.sampler,
                                                  .lsh = o.lsh, .seed = seeds.split(2).next_u64(),
                                                  .placement = o.placement, .storage = o.precision});
}

}  // namespace frugal::layers
