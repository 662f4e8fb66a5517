#include "core/sparse_batch.h"

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

}  // namespace frugal
