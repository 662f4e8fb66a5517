// What `frugal plan` measures on this machine itself, because a 1-rank calibration run cannot show
// it: the CPU time DCT-DP spends per touched gradient entry (the thresholder's per-row selection and
// the encoding of what it sends, then decoding and adding the other replicas' messages), and the CPU
// time the collectives spend per byte they send (copies and reductions). Both on one thread.
#pragma once

#include <cstddef>

namespace frugal::plan {

struct ProbeResult {
  double compress_seconds_per_entry = 0;  // per touched entry a replica thresholds and encodes
  double merge_seconds_per_entry = 0;     // per received entry decoded and added
  double collective_seconds_per_byte = 0;  // per byte a rank sends in a ring all-reduce, in-process
};

// `keep` and `cols`: the DCT-DP keep fraction and a row's width (the model's hidden size).
ProbeResult probe_machine(double keep, size_t cols);

}  // namespace frugal::plan
