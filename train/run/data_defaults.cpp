#include "train/run/data_defaults.h"

#include <array>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace frugal::run {
namespace {

// The widths --hidden auto picks among for few-shot data, widest first (GCIDE min5, centroid start,
// 5 epochs: P@1 0.078 at 256, 0.106 at 512, 0.120 at 1024; 0.044 at 128).
constexpr std::array<size_t, 3> kFewShotWidths{1024, 512, 256};

double epoch_work(const data::DatasetStats& s, size_t hidden, double rows_per_point) {
  return static_cast<double>(s.points) * static_cast<double>(hidden) * (s.average_nonzeros + rows_per_point);
}

double state_bytes(const DataDefaultsRequest& r, size_t hidden) {
  return r.state_per_width * static_cast<double>(hidden) + r.state_fixed;
}

bool state_fits(const DataDefaultsRequest& r, size_t hidden) {
  return r.memory_bytes <= 0.0 || state_bytes(r, hidden) <= kStateShareOfMemory * r.memory_bytes;
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / 1073741824.0); }

// What a width costs, for the log: its model state against the node's memory and an epoch's work.
std::string width_cost(const data::DatasetStats& stats, const DataDefaultsRequest& r, size_t hidden) {
  std::string cost = fmt::format("an epoch ~{:.2g} multiply-adds", epoch_work(stats, hidden, r.rows_per_point));
  if (r.state_per_width > 0.0)
    cost = fmt::format("model state ~{}{}, {}", gib(state_bytes(r, hidden)),
                       r.memory_bytes > 0.0 ? fmt::format(" of the {} {}", gib(r.memory_bytes), r.memory_source)
                                            : std::string(),
                       cost);
  return cost;
}

// `wanted`, else the widest width half as wide, a quarter, ... whose state fits the memory (down to
// kNarrowestAutoHidden, taken even when it does not: the weights check then says why).
size_t widest_fitting(const DataDefaultsRequest& r, size_t wanted) {
  size_t w = wanted;
  while (w / 2 >= kNarrowestAutoHidden && !state_fits(r, w)) w /= 2;
  return w;
}

std::string narrowed_reason(const DataDefaultsRequest& r, size_t wanted) {
  return fmt::format("hidden {}'s model state (~{}) would take more than {:.0f}% of the {} {}", wanted,
                     gib(state_bytes(r, wanted)), 100.0 * kStateShareOfMemory, gib(r.memory_bytes), r.memory_source);
}

}  // namespace

DataDefaults choose_data_defaults(const data::DatasetStats& stats, const DataDefaultsRequest& request) {
  DataDefaults d;
  const bool few_shot = request.network && stats.points > 0 && stats.median_label_support <= kFewShotSupport;
  const std::string looks =
      fmt::format("median {} training point{} behind a label occurrence, {:.0f}% of them with a label of <= 2 points",
                  stats.median_label_support, stats.median_label_support == 1 ? "" : "s", 100.0 * stats.rare_label_share);
  if (!few_shot) {
    d.centroid_start = request.centroid_start.value_or(false);
    if (!request.network) return d;
    if (!request.hidden_auto) {
      d.summary = fmt::format("labels: {} (not few-shot: the defaults)", looks);
      return d;
    }
    d.hidden = widest_fitting(request, kDefaultHidden);
    d.narrowed_for_memory = d.hidden < kDefaultHidden;
    d.step_cost_ratio = static_cast<double>(d.hidden) / static_cast<double>(kDefaultHidden);
    d.summary = d.narrowed_for_memory
                    ? fmt::format("labels: {} (not few-shot) -> hidden {} ({}), not {}: {}; --hidden sets it", looks,
                                  d.hidden, width_cost(stats, request, d.hidden), kDefaultHidden,
                                  narrowed_reason(request, kDefaultHidden))
                    : fmt::format("labels: {} (not few-shot: the defaults; hidden {}: {})", looks, d.hidden,
                                  width_cost(stats, request, d.hidden));
    return d;
  }
  d.few_shot = true;
  std::vector<std::string> chose;
  d.centroid_start = request.centroid_start.value_or(true);
  if (!request.centroid_start) chose.emplace_back("centroid start");
  if (request.lr_auto && d.centroid_start) {
    d.lr = kCentroidStartLr;
    chose.push_back(fmt::format("lr {:g}", kCentroidStartLr));
  }
  if (request.hidden_auto) {
    // The widest within the epoch's work budget (the narrowest few-shot width at least), then the
    // widest of those left whose state fits the memory.
    size_t by_work = kFewShotWidths.back();
    for (const size_t width : kFewShotWidths)
      if (epoch_work(stats, width, request.rows_per_point) <= request.epoch_work_budget) {
        by_work = width;
        break;
      }
    d.hidden = widest_fitting(request, by_work);
    const bool narrowed = d.hidden < by_work;
    d.narrowed_for_memory = narrowed;
    d.step_cost_ratio = static_cast<double>(d.hidden) / static_cast<double>(kDefaultHidden);
    chose.push_back(fmt::format("hidden {} (a step ~{:.2g}x that of hidden {}; {}{})", d.hidden, d.step_cost_ratio,
                                kDefaultHidden, width_cost(stats, request, d.hidden),
                                narrowed ? fmt::format("; narrower than {}: {}", by_work, narrowed_reason(request, by_work))
                                         : std::string()));
  }
  if (request.infer_auto) {
    d.ensemble = true;
    chose.emplace_back("--infer ensemble (the network blended with the label centroids)");
  }
  d.summary = fmt::format("few-shot labels: {} -> {}", looks,
                          chose.empty() ? std::string("nothing to choose (every setting given)")
                                        : fmt::format("{}", fmt::join(chose, ", ")));
  return d;
}

}  // namespace frugal::run
