// Thresholder: the data-parallel half of Dynamic Communication Thresholding (DCT, KDD 2021).
// Each step a gradient block is added to this rank's residual (error feedback); only entries whose
// magnitude reaches tau are sent, the others stay in the residual for later steps. tau is the
// magnitude at the top-`keep` fraction of the accumulated block, re-estimated only every
// `reestimate_every` steps (stale in between, which is what makes DCT cheap), either exactly
// (a selection over the whole block) or from a seeded random sample of its entries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/codec.h"
#include "comm/exchange.h"  // ThresholdOptions, ThresholderState
#include "core/rng.h"

namespace frugal::comm {


// The magnitude at the top-`keep` fraction of |values| (the k-th largest, k = ceil(keep * n)).
float exact_threshold(std::span<const float> values, float keep);
// The same estimated from `samples` entries drawn uniformly with replacement.
float sampled_threshold(std::span<const float> values, float keep, size_t samples, Rng& rng);

// v rounded to what `wire` carries, the rounding the codec applies (f32: v itself). A finite v too
// large for the type becomes its largest finite value rather than infinity, so error feedback
// keeps the excess instead of sending inf and keeping -inf (v - result stays exact for f16 while
// |v| < 2^28, beyond any sane gradient).
float round_to_wire(float v, ValueType wire);


class Thresholder {
 public:
  Thresholder(const ThresholdOptions& options, size_t size);
  // accumulated := gradient + residual; sends the entries with |accumulated| >= tau as sorted
  // (index, value) pairs and keeps the rest as the new residual. sent + residual == accumulated,
  // exactly, entry by entry.
  void compress(std::span<const float> gradient, std::vector<uint32_t>& indices, std::vector<float>& values);
  // Row-sparse form for a parameter of size()/cols rows: `values` holds rows.size() x cols
  // (row-major) gradient rows for the sorted, unique `rows`. Only the entries of those rows are
  // candidates: they are added to the residual, tau is re-estimated (on the same schedule as
  // compress()) over the candidates alone, and the residual of other rows waits until their row is
  // touched again. Selected entries are rounded to `wire` before sending and the rounding error
  // stays in the residual, so sent + residual == accumulated exactly. keep == 1 sends every
  // candidate entry (zeros included); keep < 1 never sends a zero. indices are flat
  // (row * cols + c) and strictly increasing. ValueType::sign sends every selected entry as
  // +-(their mean magnitude) and keeps the difference (then only up to float rounding); it never
  // sends a zero, even at keep 1.
  void compress_rows(size_t cols, std::span<const uint32_t> rows, const float* values, ValueType wire,
                     std::vector<uint32_t>& indices, std::vector<float>& sent);
  float tau() const { return tau_; }
  uint64_t steps() const { return steps_; }
  // The fraction the next step keeps: the automatic one (ThresholdOptions::auto_energy) or the
  // schedule's.
  float keep() const { return options_.auto_energy > 0.0f ? auto_keep_ : options_.keep_at(steps_); }
  // The automatic keep's smoothed carried energy and its back-offs so far (auto_energy only).
  double carried_energy() const { return carried_energy_; }
  uint64_t backoffs() const { return backoffs_; }
  std::span<const float> residual() const { return residual_; }
  std::span<const float> velocity() const { return velocity_; }
  ThresholderState state() const;
  // Fails, naming both sizes, when the state belongs to a parameter of another size. A state without
  // a velocity restores one of zeros (a run that turns momentum correction on when resuming).
  void restore(const ThresholderState& state);

 private:
  // On schedule, and every step of the warm-up including the first after it, or of the automatic
  // keep (keep changes each step).
  bool estimate_due() const {
    return steps_ % options_.reestimate_every == 0 || (options_.warmup_steps > 0 && steps_ <= options_.warmup_steps) ||
           options_.auto_energy > 0.0f;
  }
  // The automatic keep's step: `total` is the energy of the step's accumulated candidates, `carried`
  // what the message carries of it (ThresholdOptions::auto_energy).
  void adapt_keep(double total, double carried);
  // ThresholdOptions::explore: the distance from one explored entry to the next in a pass, drawn
  // geometric (success probability explore), so a pass over n entries draws ~n * explore numbers.
  size_t explore_gap();
  // The first explored position of a pass (none: SIZE_MAX, exploration off).
  size_t first_explored() { return options_.explore > 0.0f ? explore_gap() - 1 : SIZE_MAX; }
  // residual[at + i] += g[i] for i < n, or with momentum correction residual += (u = momentum * u
  // + scale * g), entry by entry.
  void accumulate(size_t at, const float* g, size_t n);
  // compress_rows' accumulation of `values` (row j's at values + j * cols) and selection (the
  // three ways below).
  void accumulate_and_select(size_t cols, std::span<const uint32_t> rows, const float* values, ValueType wire,
                             std::vector<uint32_t>& indices, std::vector<float>& sent);
  // compress_rows' under ThresholdOptions::per_row: each row accumulated, then its top
  // ceil(keep * cols) selected.
  void select_per_row(size_t cols, std::span<const uint32_t> rows, const float* values, float keep, ValueType wire,
                      std::vector<uint32_t>& indices, std::vector<float>& sent);
  // compress_rows' selection under ValueType::sign: the n candidates of `rows` at or above tau_.
  void send_signs(size_t cols, std::span<const uint32_t> rows, size_t n, std::vector<uint32_t>& indices,
                  std::vector<float>& sent);

  ThresholdOptions options_;
  std::vector<float> residual_;
  std::vector<float> velocity_;  // ThresholdOptions::momentum > 0 only
  float tau_ = 0.0f;
  uint64_t steps_ = 0;
  float auto_keep_ = 1.0f;
  double carried_energy_ = 1.0;
  uint64_t backoffs_ = 0;
  // compress_rows() hit its estimation step with no candidates: estimate at the next step that has
  // some instead of leaving tau at a value estimated from nothing.
  bool estimate_pending_ = false;
  Rng rng_;
};

}  // namespace frugal::comm
