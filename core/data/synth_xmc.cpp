#include "core/data/synth_xmc.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::data {
namespace {

// Draws of an already drawn label before a point's remaining labels are taken in rank order.
constexpr size_t kMaxRepeatedDraws = 64;

class Generator {
 public:
  explicit Generator(const SynthXmcOptions& o) : o_(o), root_(o.seed) {
    // Popularity by rank, then a random rank -> label id map so popular labels are spread out.
    cdf_.resize(o.labels);
    double total = 0.0;
    for (uint32_t r = 0; r < o.labels; ++r) cdf_[r] = total += 1.0 / std::pow(r + 1.0, o.zipf);
    for (double& c : cdf_) c /= total;
    label_of_rank_.resize(o.labels);
    for (uint32_t i = 0; i < o.labels; ++i) label_of_rank_[i] = i;
    Rng rng = root_.split(1);
    for (size_t i = o.labels; i > 1; --i) std::swap(label_of_rank_[i - 1], label_of_rank_[rng.below(i)]);
    drawn_.assign(o.labels, 0);
  }

  uint32_t prototype_feature(uint32_t label, uint32_t j) const {
    return static_cast<uint32_t>(root_.split(2).split(label).split(j).next_u64() % o_.features);
  }

  Dataset make(size_t n, uint64_t stream, const std::string& name) {
    Dataset d;
    d.num_features = o_.features;
    d.num_labels = o_.labels;
    d.source = name;
    Rng rng = root_.split(stream);
    std::vector<uint32_t> labels, ids;
    std::vector<float> values;
    std::vector<std::pair<uint32_t, float>> feats;
    const uint32_t want_labels = std::min(o_.labels_per_point, o_.labels);
    for (size_t i = 0; i < n; ++i) {
      labels.clear();
      // By popularity. A steep --zipf makes the first few ranks all but certain, and drawing more
      // distinct labels than they are would never end: after a bounded number of draws that add
      // nothing, the rest are the most popular labels not yet drawn, in rank order.
      size_t repeats = 0;
      while (labels.size() < want_labels && repeats < kMaxRepeatedDraws) {
        const double u = rng.uniform();
        const auto r = static_cast<uint32_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
        const uint32_t l = label_of_rank_[std::min(r, o_.labels - 1)];
        if (drawn_[l]) {
          ++repeats;
          continue;
        }
        drawn_[l] = 1;
        labels.push_back(l);
      }
      for (uint32_t r = 0; labels.size() < want_labels; ++r)
        if (!drawn_[label_of_rank_[r]]) {
          drawn_[label_of_rank_[r]] = 1;
          labels.push_back(label_of_rank_[r]);
        }
      for (const uint32_t l : labels) drawn_[l] = 0;
      std::sort(labels.begin(), labels.end());
      feats.clear();
      const auto noise = static_cast<uint32_t>(std::lround(o_.nnz * o_.noise));
      const uint32_t signal = o_.nnz - noise;
      for (uint32_t j = 0; j < signal; ++j) {
        // Signal features: a random label of the point, a random member of its prototype. The
        // first prototype members are likelier, so each label has a few strong features.
        const uint32_t l = labels[rng.below(labels.size())];
        const auto m = static_cast<uint32_t>(rng.below(rng.below(o_.prototype_size) + 1));
        feats.emplace_back(prototype_feature(l, m), 0.5f + rng.uniform());
      }
      for (uint32_t j = 0; j < noise; ++j)
        feats.emplace_back(static_cast<uint32_t>(rng.below(o_.features)), rng.uniform());
      std::sort(feats.begin(), feats.end());
      ids.clear();
      values.clear();
      for (const auto& [f, v] : feats) {
        if (!ids.empty() && ids.back() == f) {
          values.back() += v;
        } else {
          ids.push_back(f);
          values.push_back(v);
        }
      }
      double norm = 0.0;
      for (const float v : values) norm += double(v) * v;
      const auto inv = static_cast<float>(1.0 / std::sqrt(norm));
      for (float& v : values) v *= inv;
      d.points.add_point(ids, values, labels);
    }
    return d;
  }

 private:
  const SynthXmcOptions& o_;
  Rng root_;
  std::vector<double> cdf_;
  std::vector<uint32_t> label_of_rank_;
  std::vector<uint8_t> drawn_;  // per label: drawn for the point being made (cleared after each)
};

}  // namespace

void SynthXmcOptions::validate() const {
  FRUGAL_CHECK(features > 0, "SynthXmcOptions::features must be > 0");
  FRUGAL_CHECK(labels > 0, "SynthXmcOptions::labels must be > 0");
  FRUGAL_CHECK(nnz > 0, "SynthXmcOptions::nnz must be > 0");
  FRUGAL_CHECK(labels_per_point > 0, "SynthXmcOptions::labels_per_point must be > 0");
  FRUGAL_CHECK(prototype_size > 0, "SynthXmcOptions::prototype_size must be > 0");
  FRUGAL_CHECK(noise >= 0.0 && noise <= 1.0, fmt::format("SynthXmcOptions::noise must be in [0, 1], got {}", noise));
  FRUGAL_CHECK(zipf >= 0.0 && zipf <= kMaxZipf,
               fmt::format("SynthXmcOptions::zipf must be in [0, {}] (steeper, every point's labels are the same "
                           "few), got {}", kMaxZipf, zipf));
  // Per point: a label list searched and a feature list sorted; beyond these a point is no XMC point
  // and its work (and memory) has no bound worth waiting for.
  FRUGAL_CHECK(labels_per_point <= kMaxLabelsPerPoint,
               fmt::format("SynthXmcOptions::labels_per_point must be at most {}, got {}", kMaxLabelsPerPoint,
                           labels_per_point));
  FRUGAL_CHECK(nnz <= kMaxNnz, fmt::format("SynthXmcOptions::nnz must be at most {}, got {}", kMaxNnz, nnz));
  FRUGAL_CHECK(labels <= kMaxLabels, fmt::format("SynthXmcOptions::labels must be at most {}, got {}", kMaxLabels,
                                                 labels));
}

double SynthXmcOptions::memory_bytes() const {
  const double points = static_cast<double>(train) + static_cast<double>(test);
  // Duplicate features merge (at most `features` a point); a point's labels are distinct.
  const double per_point = 2 * sizeof(uint64_t) + (sizeof(uint32_t) + sizeof(float)) * std::min(nnz, features) +
                           sizeof(uint32_t) * std::min(labels_per_point, labels);
  // The point arrays grow by doubling: up to twice what they hold. The popularity table: a double, a
  // rank and a flag per label.
  return 2 * points * per_point + (sizeof(double) + sizeof(uint32_t) + 1) * static_cast<double>(labels);
}

SynthXmc generate_synth_xmc(const SynthXmcOptions& options) {
  options.validate();
  Generator gen(options);
  SynthXmc out;
  out.train = gen.make(options.train, 10, "synth-train");
  out.test = gen.make(options.test, 11, "synth-test");
  return out;
}

}  // namespace frugal::data
