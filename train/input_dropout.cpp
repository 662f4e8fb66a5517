#include "train/input_dropout.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::train {

void InputDropout::validate() const {
  FRUGAL_CHECK(p >= 0.0f && p < 1.0f, fmt::format("input dropout: p must be in [0, 1), got {}", p));
}

void drop_input_features(const SparseBatch& in, const InputDropout& dropout, uint64_t step, size_t first,
                         size_t stride, SparseBatch& out) {
  dropout.validate();
  out.clear();
  out.feature_ids.reserve(in.feature_ids.size());
  out.feature_values.reserve(in.feature_values.size());
  out.label_ids = in.label_ids;
  out.label_offsets = in.label_offsets;
  const float scale = 1.0f / (1.0f - dropout.p);
  const Rng at_step = Rng(dropout.seed).split(0xd509).split(step);
  for (size_t i = 0; i < in.size(); ++i) {
    const Rng point = at_step.split(first + i * stride);
    const auto ids = in.features_of(i);
    const auto values = in.values_of(i);
    for (size_t j = 0; j < ids.size(); ++j) {
      if (point.split(ids[j]).uniform() < dropout.p) continue;
      out.feature_ids.push_back(ids[j]);
      out.feature_values.push_back(values[j] * scale);
    }
    out.feature_offsets.push_back(out.feature_ids.size());
  }
}

}  // namespace frugal::train
