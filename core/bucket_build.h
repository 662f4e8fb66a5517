// What an LSH table keeps of an overfull bucket (Backend::bucket_build, core/backend.h; the host's
// table build, layers/lsh/lsh_tables.cpp): written once for the host and the device, so a table a
// GPU builds holds the neurons the CPU's holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

// One table on the host (the CPU's build, kernels/lsh_ops.cpp, and the host tables' own,
// layers/lsh/lsh_tables.cpp): code(i) is neuron i's code (< buckets); offsets (buckets + 1) and ids
// (room for n) receive the table: each bucket's neurons ascending (a counting sort), what keep()
// keeps of an overfull one. Returns the ids kept. When no bucket overflows the neurons are placed
// in ids directly; otherwise aside first (`aside`, reused).
template <class CodeOf>
uint32_t build_table(CodeOf&& code, uint64_t n, uint32_t buckets, uint64_t capacity, uint64_t seed, uint64_t t,
                     uint32_t* offsets, uint32_t* ids, std::vector<uint32_t>& aside) {
  std::fill(offsets, offsets + buckets + 1, 0u);
  for (uint64_t i = 0; i < n; ++i) ++offsets[code(i) + 1];
  bool overfull = false;
  for (uint32_t b = 0; b < buckets; ++b) {
    overfull = overfull || offsets[b + 1] > capacity;
    offsets[b + 1] += offsets[b];
  }
  if (overfull) aside.resize(n);
  uint32_t* placed = overfull ? aside.data() : ids;
  std::vector<uint32_t> fill(offsets, offsets + buckets);
  for (uint64_t i = 0; i < n; ++i) placed[fill[code(i)]++] = static_cast<uint32_t>(i);
  if (!overfull) return offsets[buckets];
  uint32_t kept = 0;
  for (uint32_t b = 0; b < buckets; ++b) {
    uint32_t* first = placed + offsets[b];
    const auto k = static_cast<uint32_t>(keep(first, offsets[b + 1] - offsets[b], capacity, seed, t, b));
    std::copy(first, first + k, ids + kept);
    offsets[b] = kept;  // bucket b's old start was read above, before it is overwritten
    kept += k;
  }
  offsets[buckets] = kept;
  return kept;
}

}  // namespace frugal::bucket_build
