#include "core/data/ctr_split.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/dataset_split.h"
#include "core/rng.h"

namespace frugal::data {

CtrSplit split_ctr(const CtrDataset& data, double test_fraction, uint64_t seed) {
  FRUGAL_CHECK(test_fraction >= 0.0 && test_fraction < 1.0,
               fmt::format("test fraction {}: expected a value in [0, 1)", test_fraction));
  data.validate();
  std::vector<uint32_t> order = shuffled_order(data.size, seed);
  // The clicks first, each class in the seeded order: every 1/test_fraction-th point of each goes.
  std::stable_partition(order.begin(), order.end(), [&](uint32_t i) { return data.labels[i] > 0.5f; });
  CtrSplit out;
  double due = Rng(seed).split(0x0ff5e7).uniform();
  for (const uint32_t i : order) {
    due += test_fraction;
    if (due >= 1.0) {
      out.test_rows.push_back(i);
      due -= 1.0;
    } else {
      out.train_rows.push_back(i);
    }
  }
  std::sort(out.train_rows.begin(), out.train_rows.end());
  std::sort(out.test_rows.begin(), out.test_rows.end());
  for (const auto& [rows, part] : {std::pair{&out.train_rows, &out.train}, std::pair{&out.test_rows, &out.test}}) {
    part->reserve(rows->size());
    for (const uint32_t i : *rows) part->append(data, i);
  }
  return out;
}

}  // namespace frugal::data
