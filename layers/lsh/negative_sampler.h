// NegativeSampler: random negatives for a sampled softmax, drawn from a proposal Q over one slice's
// labels and corrected for their sampling probability (logQ), so that a few draws per point stand
// for every label the LSH tables did not return.
//
// Why: LSH returns the labels whose weights are close to the hidden vector. A label that is never
// returned as a negative is never pushed down, so on skewed data the popular labels' logits grow
// until they win for every point at exact evaluation. Drawing negatives from Q = (1 - u) * label
// frequency + u * uniform puts popular labels into nearly every active set and still reaches every
// label now and then; the logit of a drawn label j is raised by log(c_j / (m Q(j))) (c_j: times it
// was drawn among m draws), which makes sum_j exp(z'_j) over the drawn labels an unbiased estimate of
// the normalizer's part over all labels outside the LSH set (Bengio & Senecal 2008; Jean et al.
// 2015). Labels already in the active set (true labels, LSH hits) are exact and get no offset.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace frugal::lsh {

class NegativeSampler {
 public:
  // A uniform proposal over `labels` labels until set_counts() gives frequencies.
  NegativeSampler(size_t labels, double uniform_share);
  // Training points per label (this slice's labels, in order); the proposal becomes
  // (1 - uniform_share) * counts / sum + uniform_share / labels.
  void set_counts(std::span<const uint32_t> counts);
  size_t labels() const { return prob_.size(); }
  uint32_t draw(Rng& rng) const;
  double probability(uint32_t label) const { return prob_[label]; }
  // The alias table and log Q(j) per label, as Backend::active_extend draws from them (core/backend.h,
  // ActiveExtension); generation() changes whenever they do (set_counts), so a backend that keeps a
  // copy on its device sends them again only then.
  const std::vector<float>& thresholds() const { return threshold_; }
  const std::vector<uint32_t>& aliases() const { return alias_; }
  const std::vector<double>& log_probabilities() const { return log_prob_; }
  uint64_t generation() const { return generation_; }

 private:
  void build_alias();
  double uniform_share_;
  std::vector<double> prob_;      // Q(j)
  std::vector<float> threshold_;  // Walker/Vose alias table: keep j with threshold_[j], else alias_[j]
  std::vector<uint32_t> alias_;
  std::vector<double> log_prob_;  // log Q(j)
  uint64_t generation_ = 0;
};

}  // namespace frugal::lsh
