// Seeded, splittable random numbers. Every random choice in frugal (initial weights, hash functions,
// shuffles, sampling) comes from an Rng derived from the run's seed by split(), so the same seed and
// rank count always give the same run, whatever the thread count.
#pragma once

#include <cstdint>

namespace frugal {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(mix(seed ^ 0x6a09e667f3bcc909ULL)) {}

  // An independent stream named by `stream`: the same (parent, stream) always gives the same child.
  [[nodiscard]] Rng split(uint64_t stream) const {
    Rng child(0);
    child.state_ = mix(state_ ^ mix(stream + 0x9e3779b97f4a7c15ULL));
    return child;
  }

  uint64_t next_u64() {  // SplitMix64: fast, passes BigCrush, state is one word (easy to checkpoint)
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix(state_);
  }
  uint32_t next_u32() { return static_cast<uint32_t>(next_u64() >> 32); }
  // Uniform in [0, n) without modulo bias worth caring about (Lemire's multiply-shift).
  uint64_t below(uint64_t n) {
    __extension__ using u128 = unsigned __int128;
    return static_cast<uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
  }
  float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }  // [0,1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal();  // standard normal (Box-Muller)

  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

  template <class Archive>
  void serialize(Archive& ar) { ar(state_); }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace frugal
