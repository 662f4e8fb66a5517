#include "layers/lsh/lsh_sampler.h"

#include <algorithm>
#include <cmath>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/step_profile.h"

namespace frugal::lsh {

void LshOptions::validate() const {
  FRUGAL_CHECK(tables >= 1, "LshOptions::tables must be >= 1");
  FRUGAL_CHECK(bucket_capacity >= 1, "LshOptions::bucket_capacity must be >= 1");
  FRUGAL_CHECK(max_active == 0 || max_active >= min_active,
               fmt::format("LshOptions::max_active ({}) must be >= LshOptions::min_active ({})", max_active,
                           min_active));
  FRUGAL_CHECK(rebuild_first >= 1, "LshOptions::rebuild_first must be >= 1 step");
  FRUGAL_CHECK(rebuild_growth >= 1.0 && std::isfinite(rebuild_growth), "LshOptions::rebuild_growth must be >= 1");
  FRUGAL_CHECK(rebuild_max >= rebuild_first, "LshOptions::rebuild_max must be >= LshOptions::rebuild_first");
  // Each draw is kept per sample and thread while the set is built: bound it well below memory.
  FRUGAL_CHECK(negatives <= (size_t{1} << 20),
               fmt::format("LshOptions::negatives must be at most 1048576 per point, got {}", negatives));
  FRUGAL_CHECK(negative_uniform_share >= 0.0 && negative_uniform_share <= 1.0,
               fmt::format("LshOptions::negative_uniform_share must be in [0, 1], got {}", negative_uniform_share));
}

LshSampler::LshSampler(const LshOptions& options, size_t dim, size_t neurons, uint64_t seed)
    : options_(options),
      neurons_(neurons),
      seed_(seed),
      tables_(HashFamily::create(options.family, dim, options.tables, seed), options.bucket_capacity),
      negatives_(neurons, options.negative_uniform_share) {
  options_.validate();
  interval_ = options_.rebuild_first;
}

void LshSampler::mark_changed(const std::vector<uint32_t>& rows) {
  if (changed_.size() != neurons_) changed_.assign(neurons_, 1);
  for (const uint32_t r : rows) changed_[r] = 1;
}

bool LshSampler::maybe_rebuild(const Tensor& weights, uint64_t step) {
  if (built_ && step < next_rebuild_) return false;
  rebuild(weights, step);
  return true;
}

void LshSampler::ensure_built(const Tensor& weights) {
  if (ready()) return;
  FRUGAL_CHECK(weights.rows() == neurons_, "LSH: weight rows differ from the neuron count");
  const profile::Scope phase(profile::Phase::rebuild);
  tables_.build(backend(), weights, Rng(seed_).split(0x1f).next_u64(), nullptr);
  inference_built_ = true;
}

void LshSampler::rebuild(const Tensor& weights, uint64_t step) {
  const profile::Scope phase(profile::Phase::rebuild);
  FRUGAL_CHECK(weights.rows() == neurons_, "LSH: weight rows differ from the neuron count");
  tables_.build(backend(), weights, Rng(seed_).split(step).next_u64(), built_ ? &changed_ : nullptr);
  changed_.assign(neurons_, 0);
  if (built_)
    interval_ = std::min<uint64_t>(options_.rebuild_max,
                                   static_cast<uint64_t>(std::ceil(interval_ * options_.rebuild_growth)));
  built_ = true;
  next_rebuild_ = step + interval_;
  ++rebuilds_;
}


void LshSampler::place_negatives(Backend& be, size_t draws) const {
  if (negatives_on_ != &be || negatives_generation_ != negatives_.generation()) {
    for (Tensor* t : {&threshold_t_, &alias_t_, &log_prob_t_}) keep_on(*t, be);
    assign_values(threshold_t_, std::span<const float>(negatives_.thresholds()));
    assign_values(alias_t_, std::span<const uint32_t>(negatives_.aliases()));
    assign_values(log_prob_t_, std::span<const double>(negatives_.log_probabilities()));
    negatives_on_ = &be;
    negatives_generation_ = negatives_.generation();
  }
  if (log_count_.size() != draws + 1 || log_count_t_.owner() != (be.device().is_host() ? nullptr : &be)) {
    log_count_.resize(draws + 1);
    log_count_[0] = 0.0;
    for (size_t c = 1; c <= draws; ++c) log_count_[c] = std::log(static_cast<double>(c));
    keep_on(log_count_t_, be);
    assign_values(log_count_t_, std::span<const double>(log_count_));
  }
}

void LshSampler::sample(const Tensor& h, const SparseBatch* labels, uint32_t label_base,
                        uint64_t step, ActiveTensors& out, size_t max_active) const {
  FRUGAL_CHECK(ready(), "LSH: sample() before the tables were built");
  const size_t b = h.rows();
  Backend& be = backend();
  // Every sample's codes in one go (the backend's LSH op), kept where it computes.
  {
    const profile::Scope phase(profile::Phase::hash);
    keep_on(codes_, be);
    tables_.family().hash(be, h, {}, codes_);
  }
  const profile::Scope phase(profile::Phase::sample);
  // Each sample's true labels in this sampler's range, once each, in order: they come first. They
  // are the one part of the sets that the host makes (from the batch it read), and go up.
  label_offsets_.assign(1, 0);
  label_ids_.clear();
  labels_distinct_ = true;
  if (labels != nullptr) {
    if (label_seen_.size() != neurons_) label_seen_.assign(neurons_, 0);
    for (size_t i = 0; i < b; ++i) {
      const size_t first = label_ids_.size();
      for (const uint32_t l : labels->labels_of(i)) {
        if (l < label_base || l - label_base >= neurons_) continue;
        if (label_seen_[l - label_base] != 0) {
          labels_distinct_ = false;
          continue;
        }
        label_seen_[l - label_base] = 1;
        label_ids_.push_back(l - label_base);
      }
      for (size_t e = first; e < label_ids_.size(); ++e) label_seen_[label_ids_[e]] = 0;
      label_offsets_.push_back(label_ids_.size());
    }
  } else {
    label_offsets_.assign(b + 1, 0);
  }
  values_where(label_offsets_t_, label_offsets_, Dtype::u64, be);
  values_where(label_ids_t_, label_ids_, Dtype::u32, be);
  const size_t bound = max_active > 0 ? max_active : options_.max_active;
  // Random negatives only in training (with labels); their logit corrections travel alongside.
  const size_t draws = labels != nullptr ? options_.negatives : 0;
  const bool extend = draws > 0 || options_.min_active > 0;
  // The union on the backend (kernels/lsh_ops.cpp on the CPU; on the CUDA backend, in tables it
  // keeps on the device), then the top-up and the negatives (active_extend), set to set where the
  // backend computes.
  ActiveTensors& found = extend ? union_ : out;
  for (Tensor* t : {&found.offsets, &found.ids, &found.logit_offsets, &scanned_}) keep_on(*t, be);
  // A capped set keeps room for the random negatives: the logQ-corrected estimate of the labels
  // outside the set needs them, however many candidates the tables return.
  const size_t union_cap = bound > draws ? bound - draws : bound;
  be.bucket_union(tables_.view(),
                  {.samples = b, .codes = &codes_, .label_offsets = &label_offsets_t_, .labels = &label_ids_t_,
                   .cap = union_cap, .scanned = &scanned_},
                  found);
  if (extend) {
    if (draws > 0) place_negatives(be, draws);
    for (Tensor* t : {&out.offsets, &out.ids, &out.logit_offsets}) keep_on(*t, be);
    be.active_extend({.rng_state = Rng(seed_).split(0x5a3).split(step).state(), .neurons = neurons_,
                      .min_active = options_.min_active, .cap = bound, .draws = draws, .logq = options_.logq,
                      .threshold = &threshold_t_, .alias = &alias_t_, .log_prob = &log_prob_t_,
                      .log_count = &log_count_t_},
                     union_, out);
  }
  // Per bucket entry: its id read (then its neuron's hit counter, a scattered access into a
  // neuron-sized array that mostly stays in cache); per active label: its id and logit offset
  // written. (The entries read are counted where the host can read them: a host backend's.)
  double scanned = 0.0;
  if (scanned_.is_host())
    for (const uint64_t n : scanned_.u64()) scanned += static_cast<double>(n);
  profile::count(profile::Phase::sample, 0.0, 4.0 * scanned + 8.0 * static_cast<double>(out.total()), 4.0 * scanned);
}

void LshSampler::save(cereal::BinaryOutputArchive& ar) const {
  ar(next_rebuild_, interval_, rebuilds_, built_);
  if (built_) tables_.save(ar);
}

void LshSampler::load(cereal::BinaryInputArchive& ar) {
  ar(next_rebuild_, interval_, rebuilds_, built_);
  // Tables of another width are rebuilt at the next step (maybe_rebuild) or query (ensure_built).
  if (built_ && !tables_.load(ar)) built_ = false;
}

}  // namespace frugal::lsh
