// Statistics of a Criteo-format file, read as a stream (`frugal data stats --format criteo`):
// samples and click rate; per integer feature the missing share and range; per categorical field
// the distinct ids, the missing share, the most frequent id's share and how many ids occur once,
// 2-9, 10-99 and 100+ times. The long tail there is what hashed and frequency-split embeddings
// are about. Memory grows with the distinct ids (32-64 bytes each), not with the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/ctr_reader.h"

namespace frugal::data {

struct CtrDenseStats {
  uint64_t missing = 0, negative = 0;
  int64_t min = 0, max = 0;  // of the values present (0 when none is)
};

struct CtrFieldStats {
  uint64_t missing = 0, distinct = 0;
  uint64_t top_id = 0, top_count = 0;  // the most frequent id (the smallest such id on a tie)
  uint64_t ids_once = 0, ids_2_9 = 0, ids_10_99 = 0, ids_100_plus = 0;  // ids by occurrence count
};

struct CtrStats {
  uint64_t samples = 0, clicks = 0;
  std::vector<CtrDenseStats> dense;  // I1..I13
  std::vector<CtrFieldStats> cats;   // C1..C26

  // Human-readable, a table per feature kind, each line starting with `indent`.
  std::string format(const std::string& indent = "") const;
};

// Reads `reader` to its end.
CtrStats compute_ctr_stats(CtrReader& reader);

}  // namespace frugal::data
