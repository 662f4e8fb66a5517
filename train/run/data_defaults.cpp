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

}  // namespace

DataDefaults choose_data_defaults(const data::DatasetStats& stats, const DataDefaultsRequest& request) {
  DataDefaults d;
  const bool few_shot = request.network && stats.points > 0 && stats.median_label_support <= kFewShotSupport;
  const std::string looks =
      fmt::format("median {} training point{} behind a label occurrence, {:.0f}% of them with a label of <= 2 points",
                  stats.median_label_support, stats.median_label_support == 1 ? "" : "s", 100.0 * stats.rare_label_share);
  if (!few_shot) {
    d.centroid_start = request.centroid_start.value_or(false);
    d.summary = request.network ? fmt::format("labels: {} (not few-shot: the defaults)", looks) : std::string();
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
    d.hidden = kFewShotWidths.back();
    for (const size_t width : kFewShotWidths)
      if (epoch_work(stats, width, request.rows_per_point) <= request.epoch_work_budget) {
        d.hidden = width;
        break;
      }
    d.step_cost_ratio = static_cast<double>(d.hidden) / static_cast<double>(kDefaultHidden);
    chose.push_back(fmt::format("hidden {} (a step ~{:.0f}x that of hidden {})", d.hidden, d.step_cost_ratio,
                                kDefaultHidden));
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
