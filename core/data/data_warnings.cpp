#include "core/data/data_warnings.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/warnings.h"

namespace frugal::data {

void warn_suspicious(const Dataset& data, bool training) {
  const SparseBatch& p = data.points;
  // The two largest distinct label ids that occur, and whether at least 20 distinct ones do (a stray
  // id stands out against a population, not against two or three labels of a small file).
  int64_t largest = -1, second = -1;
  std::vector<uint32_t> some;
  for (const uint32_t l : p.label_ids) {
    if (some.size() < 20 && std::find(some.begin(), some.end(), l) == some.end()) some.push_back(l);
    if (l > largest) {
      second = largest;
      largest = l;
    } else if (l < largest && l > second) {
      second = l;
    }
  }
  // "Far above": beyond 1,000 and more than 4x the next one. A stray id costs an output row per id below it.
  if (some.size() >= 20 && largest >= 1000 && largest > 4 * (second + 1))
    warn(fmt::format("{}: label {} is far above every other label (the next largest is {}): a mistyped id? the "
                     "output layer gets {} rows",
                     data.source, largest, second, largest + 1));
  else if (training && largest >= 0 && data.num_labels >= 1000 && data.num_labels > 4 * static_cast<uint64_t>(largest + 1))
    warn(fmt::format("{}: the header declares {} labels, but no id above {} occurs: the output layer gets {} rows, "
                     "{}x those the data uses",
                     data.source, data.num_labels, largest, data.num_labels, data.num_labels / (largest + 1)));
  size_t beyond = 0, first = 0;
  float worst = 0.0f;
  for (size_t i = 0; i < p.size(); ++i)
    for (const float v : p.values_of(i))
      if (std::fabs(v) > kSaneFeatureMagnitude) {
        if (beyond++ == 0) first = i;
        worst = std::max(worst, std::fabs(v));
      }
  if (beyond > 0)
    warn(fmt::format("{}: {} feature value(s) beyond +-{:g} (the first at point {}, the largest {:g}): a network "
                     "trained on values this large diverges; scale the features (e.g. to [0, 1] or unit norm)",
                     data.source, beyond, kSaneFeatureMagnitude, first + 1, worst));
}

}  // namespace frugal::data
