// SparseBatch: a batch of points in CSR form — feature ids with values, and label lists. What the
// data loader produces and the first layer and the loss consume.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace frugal {

// A batch's features in CSR form over memory held elsewhere (a SparseBatch, or host tensors): what
// the host kernels read.
struct SparseView {
  std::span<const uint64_t> offsets;
  std::span<const uint32_t> ids;
  std::span<const float> values;
  size_t size() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::span<const uint32_t> features_of(size_t i) const { return ids.subspan(offsets[i], offsets[i + 1] - offsets[i]); }
  std::span<const float> values_of(size_t i) const { return values.subspan(offsets[i], offsets[i + 1] - offsets[i]); }
};

struct SparseBatch {
  // Point i's features are feature_ids/feature_values[feature_offsets[i] .. feature_offsets[i+1]).
  std::vector<uint64_t> feature_offsets{0};
  std::vector<uint32_t> feature_ids;
  std::vector<float> feature_values;
  // Point i's labels are label_ids[label_offsets[i] .. label_offsets[i+1]) (possibly none).
  std::vector<uint64_t> label_offsets{0};
  std::vector<uint32_t> label_ids;

  size_t size() const { return feature_offsets.size() - 1; }
  void clear();
  void add_point(std::span<const uint32_t> ids, std::span<const float> values,
                 std::span<const uint32_t> labels);
  // This batch := points [first, first + count) of `from` (features and labels).
  void assign_points(const SparseBatch& from, size_t first, size_t count);

  std::span<const uint32_t> features_of(size_t i) const {
    return {feature_ids.data() + feature_offsets[i], feature_offsets[i + 1] - feature_offsets[i]};
  }
  std::span<const float> values_of(size_t i) const {
    return {feature_values.data() + feature_offsets[i],
            feature_offsets[i + 1] - feature_offsets[i]};
  }
  SparseView features() const { return {feature_offsets, feature_ids, feature_values}; }
  std::span<const uint32_t> labels_of(size_t i) const {
    return {label_ids.data() + label_offsets[i], label_offsets[i + 1] - label_offsets[i]};
  }
};

}  // namespace frugal
