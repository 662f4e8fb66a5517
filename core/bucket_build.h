// What an LSH table keeps of an overfull bucket (Backend::bucket_build, core/backend.h; the host's
// table build, layers/lsh/lsh_tables.cpp): written once for the host and the device, so a table a
// GPU builds holds the neurons the CPU's holds.
#pragma once

#include <cstdint>

#include "core/device_rng.h"
#include "core/host_device.h"

namespace frugal::bucket_build {

// rows[0 .. count) are bucket b of table t (ascending). Returns how many it keeps, rows[0 .. kept):
// all of them, or, beyond capacity, the first capacity of a shuffle seeded by (seed, t, b).
FRUGAL_HOST_DEVICE inline uint64_t keep(uint32_t* rows, uint64_t count, uint64_t capacity, uint64_t seed, uint64_t t,
                                        uint64_t b) {
  if (count <= capacity) return count;
  DeviceRng rng = DeviceRng::seeded(seed).split(t).split(b);
  for (uint64_t j = 0; j < capacity; ++j) {
    const uint64_t k = j + rng.below(count - j);
    const uint32_t r = rows[j];
    rows[j] = rows[k];
    rows[k] = r;
  }
  return capacity;
}

}  // namespace frugal::bucket_build
