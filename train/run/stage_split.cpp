#include "train/run/stage_split.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"
#include "core/parse.h"

namespace frugal::run {

std::vector<size_t> parse_stage_split(const std::string& text) {
  if (text == "auto") return {};
  return parse_list<size_t>("--stage-split", text, "layer count",
                            "auto, or the layers of each stage separated by commas, e.g. 1,3", [](size_t n) { return n > 0; });
}

std::vector<size_t> split_stages(const std::vector<double>& costs, size_t stages, const std::vector<size_t>& given) {
  const size_t layers = costs.size();
  FRUGAL_CHECK(stages >= 1 && stages <= layers,
               fmt::format("--pipeline {}: the network has {} layers (the input layer, one per further hidden width, the "
                           "output layer), so at most {} stages", stages, layers, layers));
  if (!given.empty()) {
    FRUGAL_CHECK(given.size() == stages, fmt::format("--stage-split gives {} stages, --pipeline asks for {}", given.size(),
                                                     stages));
    const size_t sum = std::accumulate(given.begin(), given.end(), size_t{0});
    FRUGAL_CHECK(sum == layers, fmt::format("--stage-split gives {} layers in all; the network has {} (the input layer, "
                                            "one per further hidden width, the output layer)", sum, layers));
    return given;
  }
  // best[s][l]: the least largest stage cost placing the first l layers on s stages.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(layers + 1, kInf));
  std::vector<std::vector<size_t>> cut(stages + 1, std::vector<size_t>(layers + 1, 0));
  best[0][0] = 0.0;
  for (size_t s = 1; s <= stages; ++s)
    for (size_t l = s; l <= layers; ++l)
      for (size_t from = s - 1; from < l; ++from) {
        double cost = std::accumulate(costs.begin() + static_cast<std::ptrdiff_t>(from),
                                      costs.begin() + static_cast<std::ptrdiff_t>(l), 0.0);
        if (l < layers) cost *= 4.0 / 3.0;  // a stage before the last recomputes its forward passes
        const double worst = std::max(best[s - 1][from], cost);
        if (worst < best[s][l]) best[s][l] = worst, cut[s][l] = from;
      }
  std::vector<size_t> counts(stages);
  for (size_t s = stages, l = layers; s > 0; --s) {
    counts[s - 1] = l - cut[s][l];
    l = cut[s][l];
  }
  return counts;
}

size_t default_micro_batches(size_t stages, size_t batch) {
  return std::max<size_t>(1, std::min(2 * stages, batch / 16));
}

}  // namespace frugal::run
