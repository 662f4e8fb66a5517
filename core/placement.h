// Placement of a layer's output neurons over a model-parallel group: Replicated (every rank holds
// all of them) or Sliced (rank r holds a contiguous block). Slices are equal by default or
// proportional to per-rank weights, so a faster node can own more neurons.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace frugal {

namespace comm {
class Communicator;
}

// Boundaries of `parts` contiguous slices of `total` items: slice r is [b[r], b[r+1]). Equal when
// `weights` is empty, else proportional to it (largest-remainder rounding). A weight of 0 gives an
// empty slice (a rank that holds none of the layer: --slice-weights auto leaves a rank out when
// its share would slow the group down); every other slice gets >= 1 item when total allows. At
// least one weight must be positive.
std::vector<size_t> slice_bounds(size_t total, size_t parts, std::span<const double> weights = {});

struct Placement {
  comm::Communicator* group = nullptr;  // nullptr or a 1-rank group: replicated
  std::vector<double> weights;          // slice weights per rank of the group (empty: equal)

  static Placement replicated() { return {}; }
  static Placement sliced(comm::Communicator& group, std::vector<double> weights = {}) {
    return {&group, std::move(weights)};
  }
  bool is_sliced() const;
  int rank() const;
  int parts() const;
  // Bounds of every rank's slice of `total` neurons (a single slice when replicated).
  std::vector<size_t> bounds(size_t total) const;
  // This rank's slice [begin, end) of `total` neurons.
  std::pair<size_t, size_t> own_slice(size_t total) const;
};

}  // namespace frugal
