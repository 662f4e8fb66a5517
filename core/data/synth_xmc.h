// A seeded generator of learnable extreme-classification data. Each label has a hidden prototype
// set of features; label popularity follows a Zipf-like law; a point draws its labels by
// popularity, most of its features from its labels' prototypes and the rest as uniform noise, with
// L2-normalized positive values. The same options give the same files.
#pragma once

#include <cstdint>
#include <string>

#include "core/dataset.h"

namespace frugal::data {

struct SynthXmcOptions {
  uint32_t features = 100000;
  uint32_t labels = 100000;
  size_t train = 50000;
  size_t test = 5000;
  uint32_t nnz = 75;
  uint32_t labels_per_point = 5;
  uint32_t prototype_size = 20;  // features per label prototype
  double noise = 0.3;            // fraction of a point's features that are noise
  double zipf = 1.0;             // popularity of the label of rank r is proportional to 1/(r+1)^zipf
  uint64_t seed = 1;
  void validate() const;
};

struct SynthXmc {
  Dataset train, test;
};

SynthXmc generate_synth_xmc(const SynthXmcOptions& options);

}  // namespace frugal::data
