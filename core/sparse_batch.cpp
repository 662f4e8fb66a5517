#include "core/sparse_batch.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

void SparseBatch::clear() {
  feature_offsets.assign(1, 0);
  feature_ids.clear();
  feature_values.clear();
  label_offsets.assign(1, 0);
  label_ids.clear();
}

void SparseBatch::add_point(std::span<const uint32_t> ids, std::span<const float> values,
                            std::span<const uint32_t> labels) {
  FRUGAL_CHECK(ids.size() == values.size(), "feature ids and values differ in length");
  feature_ids.insert(feature_ids.end(), ids.begin(), ids.end());
  feature_values.insert(feature_values.end(), values.begin(), values.end());
  feature_offsets.push_back(feature_ids.size());
  label_ids.insert(label_ids.end(), labels.begin(), labels.end());
  label_offsets.push_back(label_ids.size());
}

void SparseBatch::assign_points(const SparseBatch& from, size_t first, size_t count) {
  FRUGAL_CHECK(first <= from.size() && count <= from.size() - first,
               fmt::format("points {}..{} of a batch of {}", first, first + count, from.size()));
  const uint64_t f0 = from.feature_offsets[first], f1 = from.feature_offsets[first + count];
  const uint64_t l0 = from.label_offsets[first], l1 = from.label_offsets[first + count];
  const auto at = [](const auto& v, uint64_t i) { return v.begin() + static_cast<ptrdiff_t>(i); };
  feature_ids.assign(at(from.feature_ids, f0), at(from.feature_ids, f1));
  feature_values.assign(at(from.feature_values, f0), at(from.feature_values, f1));
  label_ids.assign(at(from.label_ids, l0), at(from.label_ids, l1));
  feature_offsets.resize(count + 1);
  label_offsets.resize(count + 1);
  for (size_t i = 0; i <= count; ++i) {
    feature_offsets[i] = from.feature_offsets[first + i] - f0;
    label_offsets[i] = from.label_offsets[first + i] - l0;
  }
}

}  // namespace frugal
