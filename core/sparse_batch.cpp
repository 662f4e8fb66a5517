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
  const auto part = [&](const std::vector<uint64_t>& offsets, auto& to_offsets, const auto& items, auto& to_items) {
    const uint64_t begin = offsets[first], end = offsets[first + count];
    to_items.assign(items.begin() + static_cast<ptrdiff_t>(begin), items.begin() + static_cast<ptrdiff_t>(end));
    to_offsets.resize(count + 1);
    for (size_t i = 0; i <= count; ++i) to_offsets[i] = offsets[first + i] - begin;
  };
  part(from.feature_offsets, feature_offsets, from.feature_ids, feature_ids);
  const uint64_t begin = from.feature_offsets[first], end = from.feature_offsets[first + count];
  feature_values.assign(from.feature_values.begin() + static_cast<ptrdiff_t>(begin),
                        from.feature_values.begin() + static_cast<ptrdiff_t>(end));
  part(from.label_offsets, label_offsets, from.label_ids, label_ids);
}

}  // namespace frugal
