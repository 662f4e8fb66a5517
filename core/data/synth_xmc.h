// A seeded generator of learnable extreme-classification data. Each label has a hidden prototype
// set of features; label popularity follows a Zipf-like law; a point draws its labels by
// popularity, most of its features from its labels' prototypes and the rest as uniform noise, with
// L2-normalized positive values. The same options give the same files.
#pragma once

#include <cstdint>
#include <string>

#include "core/dataset.h"

namespace frugal::data {

// The generator's bounds (SynthXmcOptions::validate): what an XMC data set has, with room to spare.
constexpr double kMaxZipf = 100;
constexpr uint32_t kMaxLabelsPerPoint = 100000;
constexpr uint32_t kMaxNnz = uint32_t{1} << 24;
constexpr uint32_t kMaxLabels = uint32_t{1} << 28;  // 268M labels: a 3 GiB popularity table

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
  // Bytes the two sets take in memory while they are made (both are held until written), and on disk.
  double memory_bytes() const;
};

struct SynthXmc {
  Dataset train, test;
};

SynthXmc generate_synth_xmc(const SynthXmcOptions& options);

}  // namespace frugal::data
