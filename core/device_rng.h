// core/rng.h's generator (SplitMix64 and its split, below and uniform) in a form that device code
// (gpu/*.cu) runs as well as the host: the same state gives the same numbers, bit for bit, so a
// CUDA kernel draws what the CPU draws (core/rng.h is the reference; tests/kernels compares them).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace frugal {

struct DeviceRng {
  uint64_t state;
  // Rng(seed)'s state.
  FRUGAL_HOST_DEVICE static DeviceRng seeded(uint64_t seed) { return {mix(seed ^ 0x6a09e667f3bcc909ULL)}; }
  FRUGAL_HOST_DEVICE static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  FRUGAL_HOST_DEVICE DeviceRng split(uint64_t stream) const {
    return {mix(state ^ mix(stream + 0x9e3779b97f4a7c15ULL))};
  }
  FRUGAL_HOST_DEVICE uint64_t next_u64() {
    state += 0x9e3779b97f4a7c15ULL;
    return mix(state);
  }
  FRUGAL_HOST_DEVICE uint64_t below(uint64_t n) {
#if defined(__CUDA_ARCH__)
    return __umul64hi(next_u64(), n);
#else
    __extension__ using u128 = unsigned __int128;
    return static_cast<uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
#endif
  }
  FRUGAL_HOST_DEVICE float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
};

}  // namespace frugal
