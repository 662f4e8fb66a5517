#include "core/dataset.h"

namespace frugal::data {

void Dataset::gather(std::span<const uint32_t> indices, SparseBatch& out) const {
  for (const uint32_t i : indices)
    out.add_point(points.features_of(i), points.values_of(i), points.labels_of(i));
}

double Dataset::average_nonzeros() const {
  return size() == 0 ? 0.0 : static_cast<double>(points.feature_ids.size()) / size();
}

double Dataset::average_labels() const {
  return size() == 0 ? 0.0 : static_cast<double>(points.label_ids.size()) / size();
}

}  // namespace frugal::data
