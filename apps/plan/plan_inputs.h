// What `frugal plan` reads: the metrics files of `frugal train` runs (their start line's config and
// their last epoch line's profile, parameter rows and samples/s), turned into the cost model's
// calibrations (1-rank runs) and into measured points to validate it against (multi-rank runs).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "apps/plan/cost_model.h"

namespace frugal::plan {

// One run's metrics: the start line and the last epoch line.
struct RunMetrics {
  std::string path;
  int world_size = 1, data = 1, model = 1, threads = 1;
  int stages = 1;                   // --pipeline S (the start line's grid D x 1 x S)
  size_t micro_batches = 0;         // the pipeline's, as the run took them
  std::vector<size_t> stage_split;  // layers per stage, as the run took them
  bool dense = false;  // --parallel data
  bool overlap = false;  // --overlap (runs from before the flag had none)
  train::ForwardSplit forward_split = train::ForwardSplit::never;  // --overlap-forward (never before the flag)
  size_t batch = 0;
  double dp_keep = 1.0, mp_keep = 1.0;
  double samples_per_s = 0, seconds = 0;
  size_t samples = 0, steps = 0;
  Scheme scheme() const;
  std::shared_ptr<const nlohmann::json> start_line, epoch_line;
};

// Reads a metrics file; errors name the file and line.
RunMetrics read_run_metrics(const std::string& path);

// A 1-rank sparse run as the cost model's calibration (per-phase compute, parameters, exchanges).
Calibration sparse_calibration(const RunMetrics& run);
// A 1-rank --parallel data run as the dense baseline's calibration.
DenseCalibration dense_calibration(const RunMetrics& run);

// The calibrations in a set of 1-rank runs: the sparse and the dense run at the fewest threads (of
// repeats, the fastest), and the thread scaling fitted from two sparse runs at different thread counts.
struct Calibrations {
  std::optional<Calibration> sparse;
  std::optional<DenseCalibration> dense;
  std::string sparse_path, dense_path;  // the files chosen
  std::shared_ptr<const nlohmann::json> sparse_start, sparse_epoch;  // the chosen sparse run's start and epoch lines
  ThreadScaling scaling;
  bool scaling_fitted = false;  // from two thread counts; else linear scaling is assumed
  std::vector<std::string> notes;
};
Calibrations calibrations_from(const std::vector<RunMetrics>& runs);

// The settings of a validated run applied to the calibration: its keep fractions and wire types.
Calibration with_exchanges_of(Calibration c, const RunMetrics& run);

}  // namespace frugal::plan
