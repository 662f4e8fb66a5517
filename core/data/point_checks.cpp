#include "core/data/point_checks.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/data_warnings.h"

namespace frugal::data {

void check_points(const Dataset& data, const PointCheckOptions& options) {
  const std::string& features = options.features_name.empty() ? data.source : options.features_name;
  const std::string& labels = options.labels_name.empty() ? data.source : options.labels_name;
  const SparseBatch& p = data.points;
  // A layer of width 0 is no network: said in the data's terms, not as the layer's size check.
  FRUGAL_CHECK(!options.training || data.num_features > 0,
               fmt::format("{}: 0 feature columns: training needs at least one feature", features));
  FRUGAL_CHECK(!options.training || data.num_labels > 0,
               fmt::format("{}: 0 label columns (no label id occurs): training needs at least one label", labels));
  // The arrays first: an entry check reads through the offsets.
  FRUGAL_CHECK(!p.feature_offsets.empty() && p.feature_offsets.front() == 0 &&
                   p.feature_offsets.back() == p.feature_ids.size() && p.feature_ids.size() == p.feature_values.size(),
               fmt::format("{}: the offsets of {} points do not end at the {} feature ids and {} values", features,
                           p.size(), p.feature_ids.size(), p.feature_values.size()));
  FRUGAL_CHECK(p.label_offsets.size() == p.feature_offsets.size() && p.label_offsets.front() == 0 &&
                   p.label_offsets.back() == p.label_ids.size(),
               fmt::format("{}: {} label rows for {} points (one per point, possibly empty)", labels,
                           p.label_offsets.size() - 1, p.size()));
  // Names for a data set in memory: its fields, not an XMC header's F and L.
  const PointLimits limits{.num_features = data.num_features,
                           .num_labels = data.num_labels,
                           .features_as = "the feature count",
                           .labels_as = "the label count",
                           .one_based_hint = " (ids are 0-based)",
                           .feature_limit = options.feature_limit,
                           .limit_what = options.limit_what};
  for (size_t i = 0; i < p.size(); ++i) {
    FRUGAL_CHECK(p.feature_offsets[i] <= p.feature_offsets[i + 1] && p.feature_offsets[i + 1] <= p.feature_ids.size() &&
                     p.label_offsets[i] <= p.label_offsets[i + 1] && p.label_offsets[i + 1] <= p.label_ids.size(),
                 fmt::format("{}: row {}: its offsets decrease or pass the end of the entries", features, i));
    const auto ids = p.features_of(i);
    const auto values = p.values_of(i);
    for (size_t j = 0; j < ids.size(); ++j)
      if (std::string why = feature_problem(limits, ids[j], values[j]); !why.empty())
        throw Error(fmt::format("{}: row {}: {}", features, i, why));
    for (const uint32_t label : p.labels_of(i))
      if (std::string why = label_problem(limits, label); !why.empty())
        throw Error(fmt::format("{}: row {}: {}", labels, i, why));
  }
  if (options.warnings) warn_suspicious(data, options.training);
}

}  // namespace frugal::data
