// One sample's additions to its LSH active set (Backend::active_extend, core/backend.h's
// ActiveExtension): the --min-active top-up and the random negatives with their logQ offsets. Written
// once for the host and the device (FRUGAL_HOST_DEVICE): the CPU backend runs it per sample with a
// neuron-sized membership array per thread, the CUDA backend one sample per thread with a search of
// the sample's own set, and both draw the same numbers, so a CUDA run and a CPU run with the same seed
// pick the same active sets. The host tests run it as the device does (members by search).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device_rng.h"
#include "core/device_sort.h"
#include "core/host_device.h"

namespace frugal::active_extend {

// The stream of a step's draws (Rng::split(0x4e47) in core/rng.h's terms; sample i's top-up draws
// from the step's split(i), its negatives from this one's split(i)).
inline constexpr uint64_t kNegativeStream = 0x4e47;

// The extension's settings as plain values and pointers where the program runs.
struct Spec {
  uint64_t rng_state = 0;
  uint64_t neurons = 0, min_active = 0, cap = 0, draws = 0;  // cap 0: none
  bool logq = true;
  const float* threshold = nullptr;
  const uint32_t* alias = nullptr;
  const double* log_prob = nullptr;
  const double* log_count = nullptr;
};

// Ascending order for a device thread, which has no library sort (the draws per sample are few).
FRUGAL_HOST_DEVICE inline void insertion_sort(uint32_t* v, uint64_t n) { frugal::insertion_sort(v, n); }

// The most entries sample i's extended set can have: its set, the top-up, the draws.
FRUGAL_HOST_DEVICE inline uint64_t room_needed(const Spec& s, uint64_t members) {
  const uint64_t target = s.min_active < s.neurons ? s.min_active : s.neurons;
  return members + (members < target ? target - members : 0) + s.draws;
}

// Sample i's extension. out holds its n members (labels, LSH neurons) and has room_needed entries;
// offsets (null without draws) gets one logit offset per entry. is_member(id, count) says whether id
// is among out[0 .. count); an id it says is not joins the set right after (out[count] = id), so an
// implementation may mark it as a member then (no id is asked about again once it joined); drawn has room for s.draws entries (scratch), which sort(drawn, m) puts in
// ascending order (insertion_sort on a device thread, std::sort on the host). Returns the set's new
// size.
template <class IsMember, class Sort>
FRUGAL_HOST_DEVICE uint64_t extend(const Spec& s, uint64_t i, uint32_t* out, uint64_t n, float* offsets,
                                   uint32_t* drawn, IsMember&& is_member, Sort&& sort) {
  const DeviceRng step{s.rng_state};
  const uint64_t target = s.min_active < s.neurons ? s.min_active : s.neurons;
  if (n < target) {
    DeviceRng rng = step.split(i);
    for (uint64_t tries = 0; n < target && tries < 8 * target; ++tries) {
      const auto id = static_cast<uint32_t>(rng.below(s.neurons));
      if (!is_member(id, n)) out[n++] = id;
    }
  }
  if (s.draws == 0) return n;
  const uint64_t members = n;
  for (uint64_t e = 0; e < members; ++e) offsets[e] = 0.0f;
  const uint64_t room = s.cap == 0 ? s.draws : (n < s.cap ? s.cap - n : 0);
  const uint64_t m = s.draws < room ? s.draws : room;
  DeviceRng rng = step.split(kNegativeStream).split(i);
  for (uint64_t d = 0; d < m; ++d) {
    const auto j = static_cast<uint32_t>(rng.below(s.neurons));
    drawn[d] = rng.uniform() < s.threshold[j] ? j : s.alias[j];
  }
  sort(drawn, m);
  for (uint64_t d = 0; d < m;) {
    const uint32_t id = drawn[d];
    uint64_t c = 0;
    while (d < m && drawn[d] == id) ++d, ++c;
    if (is_member(id, members)) continue;
    out[n] = id;
    offsets[n] = s.logq ? static_cast<float>(s.log_count[c] - s.log_count[m] - s.log_prob[id]) : 0.0f;
    ++n;
  }
  return n;
}

}  // namespace frugal::active_extend
