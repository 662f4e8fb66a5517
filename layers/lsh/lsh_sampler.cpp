#include "layers/lsh/lsh_sampler.h"

#include <algorithm>
#include <cmath>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::lsh {

struct LshSampler::Scratch {
  std::vector<uint16_t> hits;   // per neuron: 1 while it is in the current sample's set; all 0 between samples
  std::vector<uint32_t> drawn;  // random negatives of the current sample, sorted
};
using ScratchPerThread = tbb::enumerable_thread_specific<LshSampler::Scratch>;

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
  const size_t n = neurons_;
  scratch_ = std::make_shared<ScratchPerThread>([n] {
    Scratch s;
    s.hits.assign(n, 0);
    return s;
  });
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


void LshSampler::sample(const Tensor& h, const SparseBatch* labels, uint32_t label_base,
                        uint64_t step, ActiveSets& out, size_t max_active) const {
  FRUGAL_CHECK(ready(), "LSH: sample() before the tables were built");
  const size_t b = h.rows(), nt = tables_.num_tables();
  auto& per_sample = per_sample_;
  per_sample.resize(b);
  // Random negatives only in training (with labels); their logit corrections travel alongside.
  const size_t draws = labels != nullptr ? options_.negatives : 0;
  per_sample_offsets_.resize(b);
  auto& scratch = *static_cast<ScratchPerThread*>(scratch_.get());
  const Rng step_rng = Rng(seed_).split(0x5a3).split(step);
  // Every sample's codes in one go (the backend's LSH op), then the buckets' union per sample.
  codes_.resize(b * nt);
  {
    const profile::Scope phase(profile::Phase::hash);
    tables_.family().hash(backend(), h, {}, codes_.data());
  }
  const profile::Scope phase(profile::Phase::sample);
  // Each sample's true labels in this sampler's range, once each, in order: they come first.
  label_offsets_.assign(1, 0);
  label_ids_.clear();
  if (labels != nullptr) {
    Scratch& s = scratch.local();
    for (size_t i = 0; i < b; ++i) {
      const size_t first = label_ids_.size();
      for (const uint32_t l : labels->labels_of(i))
        if (l >= label_base && l - label_base < neurons_ && s.hits[l - label_base] == 0) {
          s.hits[l - label_base] = 1;
          label_ids_.push_back(l - label_base);
        }
      for (size_t e = first; e < label_ids_.size(); ++e) s.hits[label_ids_[e]] = 0;
      label_offsets_.push_back(label_ids_.size());
    }
  } else {
    label_offsets_.assign(b + 1, 0);
  }
  const size_t bound = max_active > 0 ? max_active : options_.max_active;
  const size_t cap = bound == 0 ? SIZE_MAX : bound;
  scanned_.assign(b, 0);
  // The union on the backend (kernels/lsh_ops.cpp on the CPU; on the CUDA backend, in tables it
  // keeps on the device).
  backend().bucket_union(tables_.view(),
                         {.samples = b, .codes = codes_.data(), .label_offsets = label_offsets_,
                          .labels = label_ids_, .cap = bound, .scanned = scanned_.data()},
                         union_);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, b, 1), [&](const auto& range) {
    Scratch& s = scratch.local();
    for (size_t i = range.begin(); i < range.end(); ++i) {
      std::vector<uint32_t>& active = per_sample[i];
      active.assign(union_.ids.begin() + static_cast<std::ptrdiff_t>(union_.offsets[i]),
                    union_.ids.begin() + static_cast<std::ptrdiff_t>(union_.offsets[i + 1]));
      // Members are marked so that the top-up and the negatives below skip them.
      for (const uint32_t n : active) s.hits[n] = 1;
      if (active.size() < options_.min_active) {
        Rng rng = step_rng.split(i);
        const size_t target = std::min(options_.min_active, neurons_);
        for (size_t tries = 0; active.size() < target && tries < 8 * target; ++tries) {
          const auto n = static_cast<uint32_t>(rng.below(neurons_));
          if (s.hits[n] == 0) {
            s.hits[n] = 1;
            active.push_back(n);
          }
        }
      }
      std::vector<float>& offsets = per_sample_offsets_[i];
      offsets.clear();
      // A capped set takes only as many draws as it has room for (m below is what was drawn).
      const size_t room = active.size() < cap ? cap - active.size() : 0;
      const size_t my_draws = std::min(draws, room);
      const size_t members = active.size();
      if (draws > 0) {
        // Every entry so far is exact (offset 0). Draws that land on one of them are dropped: the
        // estimate covers the labels outside the set (see negative_sampler.h).
        offsets.assign(active.size(), 0.0f);
        Rng rng = step_rng.split(0x4e47).split(i);
        s.drawn.clear();
        for (size_t d = 0; d < my_draws; ++d) s.drawn.push_back(negatives_.draw(rng));
        std::sort(s.drawn.begin(), s.drawn.end());
        const double m = static_cast<double>(my_draws);
        for (size_t d = 0; d < s.drawn.size();) {
          const uint32_t n = s.drawn[d];
          size_t c = 0;
          while (d < s.drawn.size() && s.drawn[d] == n) ++d, ++c;
          if (s.hits[n] != 0) continue;
          active.push_back(n);
          offsets.push_back(options_.logq
              ? static_cast<float>(std::log(static_cast<double>(c) / (m * negatives_.probability(n))))
              : 0.0f);
        }
      }
      for (size_t j = 0; j < members; ++j) s.hits[active[j]] = 0;
    }
  });
  out.clear();
  size_t total = 0;
  for (const auto& a : per_sample) total += a.size();
  // Per bucket entry: its id read (then its neuron's hit counter, a scattered access into a
  // neuron-sized array that mostly stays in cache); per active label: its id and logit offset
  // written.
  double scanned = 0.0;
  for (const uint64_t n : scanned_) scanned += static_cast<double>(n);
  profile::count(profile::Phase::sample, 0.0, 4.0 * scanned + 8.0 * static_cast<double>(total), 4.0 * scanned);
  out.ids.reserve(total);
  for (size_t i = 0; i < b; ++i) {
    out.ids.insert(out.ids.end(), per_sample[i].begin(), per_sample[i].end());
    out.offsets.push_back(out.ids.size());
  }
  if (draws > 0) {
    out.logit_offsets.reserve(total);
    for (size_t i = 0; i < b; ++i)
      out.logit_offsets.insert(out.logit_offsets.end(), per_sample_offsets_[i].begin(), per_sample_offsets_[i].end());
  }
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
