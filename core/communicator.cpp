#include "core/communicator.h"

#include <fmt/format.h>

namespace frugal::comm {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "unknown";
}

std::vector<size_t> displacements(std::span<const size_t> counts) {
  std::vector<size_t> d(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) d[i + 1] = d[i] + counts[i];
  return d;
}

Work Communicator::all_gather(std::span<const float> mine, std::span<float> all) {
  FRUGAL_CHECK(all.size() == mine.size() * static_cast<size_t>(size()),
               fmt::format("all_gather: output has {} floats, expected {} ranks x {}", all.size(),
                           size(), mine.size()));
  std::vector<size_t> counts(static_cast<size_t>(size()), mine.size());
  return all_gatherv(mine, all, counts);
}

Work Communicator::reduce_scatter(std::span<const float> all, std::span<float> mine, ReduceOp op) {
  FRUGAL_CHECK(all.size() == mine.size() * static_cast<size_t>(size()),
               fmt::format("reduce_scatter: input has {} floats, expected {} ranks x {}",
                           all.size(), size(), mine.size()));
  std::vector<size_t> counts(static_cast<size_t>(size()), mine.size());
  return reduce_scatterv(all, mine, counts, op);
}

}  // namespace frugal::comm
