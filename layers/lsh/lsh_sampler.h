// LshSampler: picks each sample's active output neurons. The active set is the union of the
// sample's buckets over all tables, plus (in training) the sample's true labels, bounded:
//  - at most max_active: neurons found in the most tables are kept (ties: lower id);
//  - at least min_active: topped up with uniformly random neurons (seeded by step and sample);
//  - in training, `negatives` draws from a proposal over the labels (negative_sampler.h) add random
//    negatives whose logits are corrected by their sampling probability (logQ).
// Every per-batch step is a Backend op (core/backend.h): the codes (simhash_codes / dwta_codes), the
// buckets' union with the labels (bucket_union), the top-up and the negatives (active_extend), so
// on a device the sets are made where they are used and never cross; only the batch's labels go up.
// The tables themselves are built on the host (lsh_tables.h) and copied to a device per rebuild.
// Tables are rebuilt on a schedule that starts frequent and decays: after rebuild_first steps, then
// each interval rebuild_growth times the last, capped at rebuild_max.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/active_sets.h"
#include "core/device.h"
#include "core/sparse_batch.h"
#include "core/tensor.h"
#include "layers/lsh/hash_family.h"
#include "layers/lsh/lsh_tables.h"
#include "layers/lsh/negative_sampler.h"

namespace frugal::lsh {

struct LshOptions {
  Family family = Dwta{};
  size_t tables = kDefaultTables;
  size_t bucket_capacity = 128;
  size_t min_active = 0;      // 0: no minimum
  size_t max_active = 0;      // 0: no cap
  // Random negatives per point (in training), drawn from (1 - u) * label frequency + u * uniform
  // with u = negative_uniform_share, logit-corrected by log(count / (draws * Q)) unless logq is off.
  size_t negatives = 64;
  double negative_uniform_share = 0.5;
  bool logq = true;
  uint64_t rebuild_first = 50;
  double rebuild_growth = 1.5;
  uint64_t rebuild_max = 2000;
  void validate() const;
};

class LshSampler {
 public:
  LshSampler(const LshOptions& options, size_t dim, size_t neurons, uint64_t seed);
  // Rebuilds the tables when the schedule says so (and always the first time). True if rebuilt.
  bool maybe_rebuild(const Tensor& weights, uint64_t step);
  void rebuild(const Tensor& weights, uint64_t step);
  // Builds the tables for inference when training has not (a model trained with an exact softmax,
  // or resumed on another grid), leaving the rebuild schedule alone: training still builds its own.
  void ensure_built(const Tensor& weights);
  bool ready() const { return built_ || inference_built_; }
  // The optimizer changed these rows: they are hashed again at the next rebuild.
  void mark_changed(const std::vector<uint32_t>& rows);
  void mark_all_changed() { changed_.assign(neurons_, 1); }
  // Training points per neuron (label), this sampler's neurons in order: the negatives' proposal.
  void set_label_counts(std::span<const uint32_t> counts) { negatives_.set_counts(counts); }
  // Active sets for every row of h, in out's tensors where the backend computes; true labels (offset
  // by -label_base, those in range, each once) come first: label_offsets() says how many. With
  // `labels` (training), random negatives follow the LSH hits and out.logit_offsets holds each
  // entry's logit correction (0 for labels and LSH hits).
  // `max_active` (> 0) replaces the options' cap for this call (inference keeps fewer candidates).
  void sample(const Tensor& h, const SparseBatch* labels, uint32_t label_base, uint64_t step,
              ActiveTensors& out, size_t max_active = 0) const;
  // The last call's labels: sample i's first label_offsets()[i+1] - label_offsets()[i] entries are
  // its labels (host memory), and the same offsets where the backend computes.
  std::span<const uint64_t> label_offsets() const { return label_offsets_; }
  const Tensor& label_offsets_tensor() const { return label_offsets_t_; }
  // Whether the last call's labels were distinct (a point listing a label twice has it once in its set).
  bool labels_were_distinct() const { return labels_distinct_; }
  const LshTables& tables() const { return tables_; }
  const LshOptions& options() const { return options_; }
  uint64_t rebuilds() const { return rebuilds_; }
  // The Backend that hashes (core/backend.h): the one set here, else host_backend().
  Backend& backend() const { return backend_ != nullptr ? *backend_ : host_backend(); }
  // Tables built on another device come down first (any backend reads host tables).
  void set_backend(Backend* backend) {
    const Backend* owner = tables_.device_owner();
    if (owner != nullptr && owner != (backend != nullptr ? backend : &host_backend())) tables_.bring_home();
    backend_ = backend;
  }
  void save(cereal::BinaryOutputArchive& ar) const;
  void load(cereal::BinaryInputArchive& ar);

 private:
  LshOptions options_;
  size_t neurons_;
  uint64_t seed_;
  LshTables tables_;
  NegativeSampler negatives_;
  uint64_t next_rebuild_ = 0, interval_ = 0, rebuilds_ = 0;
  bool built_ = false;
  bool inference_built_ = false;  // tables built by ensure_built(), not by the schedule
  // The negatives' tables where the backend computes (sent when they or the backend change).
  void place_negatives(Backend& be, size_t draws) const;

  std::vector<uint8_t> changed_;  // per neuron: updated since the last rebuild
  // The last call's labels per sample (the bucket union's input) on the host, a mark per neuron
  // while a sample's are listed (all 0 between samples), and the same lists where the ops run.
  mutable std::vector<uint64_t> label_offsets_;
  mutable std::vector<uint32_t> label_ids_;
  mutable std::vector<uint8_t> label_seen_;
  mutable bool labels_distinct_ = true;
  // Where the backend computes, reused across calls: the batch's codes, the labels, the union, each
  // sample's bucket entries read (the profile's, read on a host backend only).
  mutable Tensor codes_{0, 0, Dtype::u32}, label_offsets_t_{0, 0, Dtype::u64}, label_ids_t_{0, 0, Dtype::u32};
  mutable Tensor scanned_{0, 0, Dtype::u64};
  mutable ActiveTensors union_;
  // The negatives' alias table, log Q and log(count) for active_extend, and what they were made from.
  mutable Tensor threshold_t_{0, 0, Dtype::f32}, alias_t_{0, 0, Dtype::u32}, log_prob_t_{0, 0, Dtype::f64};
  mutable Tensor log_count_t_{0, 0, Dtype::f64};
  mutable std::vector<double> log_count_;
  mutable const Backend* negatives_on_ = nullptr;
  mutable uint64_t negatives_generation_ = 0;
  Backend* backend_ = nullptr;
};

}  // namespace frugal::lsh
