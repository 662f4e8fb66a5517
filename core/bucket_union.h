// One sample's LSH bucket union (Backend::bucket_union, core/backend.h) as a block of cooperating
// threads computes it: the CUDA backend's kernel runs these phases with a barrier between each,
// one block per sample, in shared memory; the host runs the same phases one thread after another
// (run_on_host), which is how the tests check the device's code on a machine without a GPU.
//
// Why sorting: the CPU backend counts hits in a neuron-sized array per thread, which a GPU cannot
// give each of a thousand samples. Here a sample's bucket entries become keys (neuron id << 32 |
// position in the scan, table by table, bucket order) sorted by a bitonic network; each run of one
// id gives its hits (the run's length) and its first position (the run's first key). One record
// per id then goes through a second sort: by first position (the order the CPU's scan finds them),
// or, when the set is capped, by hits (more first) and then id, as the CPU's partial sort.
// Integer keys only: the result is exact and does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/host_device.h"

namespace frugal::bucket_union {

inline constexpr uint64_t kEmpty = ~uint64_t{0};  // a slot without an entry: sorts last
// Keys one thread holds between the records phase's read and its write (its local storage): the
// block's key slots are at most threads * kMaxItems.
inline constexpr uint32_t kMaxItems = 32;

// (n <= 2^31: the callers' entry counts are bounded far below.)
FRUGAL_HOST_DEVICE inline uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Tables in one flat layout (the CUDA backend's device copy): table t's bucket b holds
// ids[t * ids_stride + offsets[t * (buckets + 1) + b] .. + offsets[t * (buckets + 1) + b + 1]):
// ids_stride 0 for a copy whose offsets count from the first table's ids, the neuron count for
// tables built on the device (Backend::bucket_build: each table's ids in a row of its own).
struct FlatTables {
  const uint32_t* offsets = nullptr;
  const uint32_t* ids = nullptr;
  uint32_t buckets = 0;
  uint64_t ids_stride = 0;
  FRUGAL_HOST_DEVICE const uint32_t* bucket(uint32_t t, uint32_t code, uint32_t& size) const {
    const uint32_t* o = offsets + static_cast<size_t>(t) * (buckets + 1) + code;
    size = o[1] - o[0];
    return ids + t * ids_stride + o[0];
  }
};

// One sample's problem. Tables: anything with bucket(t, code, size) as FlatTables.
template <class Tables>
struct Problem {
  Tables tables;
  uint32_t num_tables = 0;
  const uint32_t* codes = nullptr;   // the sample's code in each table
  const uint32_t* labels = nullptr;  // its labels (distinct, local ids), put first
  uint32_t num_labels = 0;
  uint64_t cap = 0;                  // 0: no cap
  uint32_t* out = nullptr;           // labels, then the union: room for num_labels + every entry
};

// The block's shared state. keys has room for pow2_at_least(the sample's entries) slots,
// table_start for num_tables + 1, runs for one counter per thread. No member initializers: the
// kernel keeps it in a __shared__ variable, which cannot have a constructor.
struct Block {
  uint64_t* keys;
  uint32_t* table_start;
  uint32_t* runs;
  uint32_t entries, slots;  // set by start()
  uint32_t count;           // set by output(): labels + the union's kept neurons
};

// Every thread: the bucket sizes of its tables (table_start[t + 1], summed by start() next).
template <class Tables>
FRUGAL_HOST_DEVICE void sizes(const Problem<Tables>& p, Block& b, uint32_t tid, uint32_t threads) {
  for (uint32_t t = tid; t < p.num_tables; t += threads) {
    uint32_t size = 0;
    p.tables.bucket(t, p.codes[t], size);
    b.table_start[t + 1] = size;
  }
}

// Thread 0 alone: where each table's bucket starts among the keys, and the slot count.
template <class Tables>
FRUGAL_HOST_DEVICE void start(const Problem<Tables>& p, Block& b) {
  b.table_start[0] = 0;
  for (uint32_t t = 0; t < p.num_tables; ++t) b.table_start[t + 1] += b.table_start[t];
  b.entries = b.table_start[p.num_tables];
  b.slots = pow2_at_least(b.entries);
}

// Every thread, slot by slot: entry e's key (its table found by bisecting the starts; a label's
// entries are kEmpty), and kEmpty in the padding.
template <class Tables>
FRUGAL_HOST_DEVICE void fill(const Problem<Tables>& p, Block& b, uint32_t tid, uint32_t threads) {
  for (uint32_t e = tid; e < b.slots; e += threads) {
    if (e >= b.entries) {
      b.keys[e] = kEmpty;
      continue;
    }
    uint32_t lo = 0, hi = p.num_tables;  // the table t with table_start[t] <= e < table_start[t + 1]
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (b.table_start[mid] <= e)
        lo = mid;
      else
        hi = mid;
    }
    uint32_t size = 0;
    const uint32_t id = p.tables.bucket(lo, p.codes[lo], size)[e - b.table_start[lo]];
    bool label = false;
    for (uint32_t l = 0; l < p.num_labels && !label; ++l) label = p.labels[l] == id;
    b.keys[e] = label ? kEmpty : (static_cast<uint64_t>(id) << 32) | e;
  }
}

// One step (k, j) of the bitonic network sorting keys ascending; the steps run for k = 2, 4, ..,
// slots and, within each, j = k / 2, k / 4, .., 1, with a barrier after each.
FRUGAL_HOST_DEVICE inline void sort_step(Block& b, uint32_t k, uint32_t j, uint32_t tid, uint32_t threads) {
  for (uint32_t i = tid; i < b.slots; i += threads) {
    const uint32_t l = i ^ j;
    if (l <= i) continue;
    const bool ascending = (i & k) == 0;
    const uint64_t x = b.keys[i], y = b.keys[l];
    if ((x > y) == ascending) {
      b.keys[i] = y;
      b.keys[l] = x;
    }
  }
}

FRUGAL_HOST_DEVICE inline bool run_start(const Block& b, uint32_t i) {
  return b.keys[i] != kEmpty && (i == 0 || (b.keys[i - 1] >> 32) != (b.keys[i] >> 32));
}

// Every thread: how many ids start a run among its slots.
FRUGAL_HOST_DEVICE inline void count_runs(Block& b, uint32_t tid, uint32_t threads) {
  uint32_t n = 0;
  for (uint32_t i = tid; i < b.slots; i += threads) n += run_start(b, i) ? 1u : 0u;
  b.runs[tid] = n;
}

// The distinct ids (every thread sums the same counters) and whether the cap applies to them.
FRUGAL_HOST_DEVICE inline uint32_t distinct(const Block& b, uint32_t threads) {
  uint32_t u = 0;
  for (uint32_t t = 0; t < threads; ++t) u += b.runs[t];
  return u;
}
template <class Tables>
FRUGAL_HOST_DEVICE bool capped(const Problem<Tables>& p, const Block& b, uint32_t threads) {
  return p.cap > 0 && p.num_labels + static_cast<uint64_t>(distinct(b, threads)) > p.cap;
}

// Every thread, reading only: the record of each run starting among its slots into local
// (kMaxItems), kEmpty elsewhere. A record sorts as the result's order wants: (first position, id)
// uncapped, (tables - hits, id) capped. A bucket holds an id at most once (layers/lsh/lsh_tables.h
// places each neuron once per table), so hits <= tables.
template <class Tables>
FRUGAL_HOST_DEVICE void records(const Problem<Tables>& p, const Block& b, uint32_t tid, uint32_t threads,
                                uint64_t* local) {
  const bool cap = capped(p, b, threads);
  uint32_t item = 0;
  for (uint32_t i = tid; i < b.slots; i += threads, ++item) {
    if (!run_start(b, i)) {
      local[item] = kEmpty;
      continue;
    }
    const uint64_t id = b.keys[i] >> 32;
    uint32_t hits = 1;
    while (i + hits < b.slots && (b.keys[i + hits] >> 32) == id && b.keys[i + hits] != kEmpty) ++hits;
    const uint64_t order = cap ? static_cast<uint64_t>(p.num_tables - hits) : (b.keys[i] & 0xffffffffu);
    local[item] = (order << 32) | id;
  }
}

// Every thread, after a barrier: its records replace its keys.
FRUGAL_HOST_DEVICE inline void store(Block& b, uint32_t tid, uint32_t threads, const uint64_t* local) {
  uint32_t item = 0;
  for (uint32_t i = tid; i < b.slots; i += threads, ++item) b.keys[i] = local[item];
}

// Every thread, the records sorted: the labels and the kept ids into out; thread 0 sets count.
template <class Tables>
FRUGAL_HOST_DEVICE void output(const Problem<Tables>& p, Block& b, uint32_t tid, uint32_t threads) {
  const uint32_t u = distinct(b, threads);
  uint64_t keep = u;
  if (capped(p, b, threads)) keep = p.cap > p.num_labels ? p.cap - p.num_labels : 0;
  for (uint32_t l = tid; l < p.num_labels; l += threads) p.out[l] = p.labels[l];
  for (uint32_t r = tid; r < keep; r += threads) p.out[p.num_labels + r] = static_cast<uint32_t>(b.keys[r]);
  if (tid == 0) b.count = p.num_labels + static_cast<uint32_t>(keep);
}

// The whole program on the host, `threads` simulated threads run one after another between
// barriers. Returns the count written to p.out.
template <class Tables>
uint32_t run_on_host(const Problem<Tables>& p, uint32_t threads) {
  std::vector<uint32_t> table_start(p.num_tables + 1), runs(threads);
  Block b{};
  b.table_start = table_start.data();
  b.runs = runs.data();
  const auto each = [&](auto&& phase) {
    for (uint32_t t = 0; t < threads; ++t) phase(t);
  };
  each([&](uint32_t t) { sizes(p, b, t, threads); });
  start(p, b);
  std::vector<uint64_t> keys(b.slots);
  b.keys = keys.data();
  const uint32_t items = (b.slots + threads - 1) / threads;
  std::vector<uint64_t> local(static_cast<size_t>(threads) * items);
  const auto sort = [&] {
    for (uint32_t k = 2; k <= b.slots; k <<= 1)
      for (uint32_t j = k >> 1; j > 0; j >>= 1) each([&](uint32_t t) { sort_step(b, k, j, t, threads); });
  };
  each([&](uint32_t t) { fill(p, b, t, threads); });
  sort();
  each([&](uint32_t t) { count_runs(b, t, threads); });
  each([&](uint32_t t) { records(p, b, t, threads, &local[static_cast<size_t>(t) * items]); });
  each([&](uint32_t t) { store(b, t, threads, &local[static_cast<size_t>(t) * items]); });
  sort();
  each([&](uint32_t t) { output(p, b, t, threads); });
  return b.count;
}

}  // namespace frugal::bucket_union
