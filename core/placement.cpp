#include "core/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/communicator.h"
#include "core/check.h"

namespace frugal {

std::vector<size_t> slice_bounds(size_t total, size_t parts, std::span<const double> weights) {
  FRUGAL_CHECK(parts >= 1, "slice_bounds: at least one part");
  FRUGAL_CHECK(weights.empty() || weights.size() == parts,
               fmt::format("{} slice weights given for {} ranks", weights.size(), parts));
  std::vector<double> w(weights.begin(), weights.end());
  if (w.empty()) w.assign(parts, 1.0);
  for (const double x : w) FRUGAL_CHECK(x >= 0 && std::isfinite(x), "slice weights must be >= 0 and finite");
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  FRUGAL_CHECK(sum > 0, "slice weights: at least one rank must have a positive weight");
  // A part of weight 0 gets nothing (a rank left out of the layer's work). Each other part gets at
  // least one item (when possible); the rest is shared by weight, remainders to the largest
  // fractional parts (ties: lower rank), so the result is exact and deterministic.
  const size_t holders = static_cast<size_t>(std::count_if(w.begin(), w.end(), [](double x) { return x > 0; }));
  const size_t base = total >= holders ? 1 : 0;
  const size_t rest = total - base * holders;
  std::vector<size_t> size(parts);
  std::vector<std::pair<double, size_t>> frac;
  size_t given = 0;
  for (size_t r = 0; r < parts; ++r) {
    if (w[r] <= 0) continue;
    const double exact = rest * w[r] / sum;
    size[r] = base + static_cast<size_t>(std::floor(exact));
    given += size[r] - base;
    frac.emplace_back(exact - std::floor(exact), r);
  }
  std::sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; given < rest; ++i, ++given) ++size[frac[i % frac.size()].second];
  std::vector<size_t> bounds(parts + 1, 0);
  for (size_t r = 0; r < parts; ++r) bounds[r + 1] = bounds[r] + size[r];
  return bounds;
}

bool Placement::is_sliced() const { return comm::is_active(group); }
int Placement::rank() const { return group != nullptr ? group->rank() : 0; }
int Placement::parts() const { return group != nullptr ? group->size() : 1; }

std::vector<size_t> Placement::bounds(size_t total) const {
  return slice_bounds(total, static_cast<size_t>(parts()), weights);
}

std::pair<size_t, size_t> Placement::own_slice(size_t total) const {
  const auto b = bounds(total);
  return {b[rank()], b[rank() + 1]};
}

}  // namespace frugal
