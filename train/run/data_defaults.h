// What `frugal train` reads from the training set before it builds the network: whether its labels
// are few-shot, and from that the defaults that `--hidden auto`, `--output-init auto` and an unset
// `--lr` resolve to. One line of the log says what was chosen and why; the run config records the
// resolved values, so every rank and a resumed run agree.
//
// Few-shot: the typical label occurrence has a handful of training points behind it
// (DatasetStats::median_label_support <= kFewShotSupport). Such a label's row can only be learnt from
// those points, and a network started from random rows memorizes them: on GCIDE (a reverse
// dictionary, median support 7 and 1) the defaults stayed at P@1 0.036 where a label-centroid ranker
// over the same tf-idf vectors reaches 0.138 (docs/tuning.md, "Few-shot labels"). Measured there and on a
// synthetic few-shot set (median support 2), a network that starts as a nearest-centroid classifier
// in its hidden space (centroid start), trains at a rate of 1e-3 (the row-wise default of 1e-2
// undoes the start within an epoch) and has a wider hidden layer (which keeps more of the tf-idf
// geometry) is 3-4x better. The synthetic multi-label sets the other defaults were measured on have
// a median support of 12-78 and keep today's defaults.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/data/dataset_stats.h"

namespace frugal::run {

// Few-shot at or below this median support (GCIDE min5: 7; the synthetic 3M-label sweep set: 12).
inline constexpr uint64_t kFewShotSupport = 8;
// The learning rate the centroid start trains at when --lr is not given.
inline constexpr float kCentroidStartLr = 1e-3f;
// The hidden width when the data is not few-shot (the default before --hidden auto existed).
inline constexpr size_t kDefaultHidden = 128;
// The narrowest width --hidden auto goes down to when even kDefaultHidden's state would not fit.
inline constexpr size_t kNarrowestAutoHidden = 16;

struct DataDefaultsRequest {
  bool hidden_auto = true;  // --hidden auto (the default)
  // --output-init: unset for auto (the default), else whether centroid was given.
  std::optional<bool> centroid_start = std::nullopt;
  bool lr_auto = true;      // no --lr
  bool infer_auto = true;   // --infer auto (the default)
  bool network = true;      // an XMC network with a sparse input layer (not IDX images, not DLRM)
  // The budget of multiply-adds per training epoch that --hidden auto widens a few-shot network
  // within: points x width x (features per point + output rows a point touches). Set so that 5
  // epochs of a 100k-point few-shot set train in under 15 minutes on 2 cores (GCIDE full, 137k
  // points: hidden 512 measured 91 s an epoch, 7.1e10; 1024 would take ~19 minutes for 5).
  double epoch_work_budget = 1.0e11;
  // The output rows a point touches in a step (the LSH softmax's active labels; all of them for
  // the exact softmax).
  double rows_per_point = 1000.0;
  // The model state at a width: state_per_width * hidden + state_fixed bytes (train/run/state_estimate.h).
  double state_per_width = 0.0, state_fixed = 0.0;
  // What the node has for it (--memory-limit, else the memory available; 0: unknown, no bound) and
  // how the log names that. --hidden auto keeps the state within kStateShareOfMemory of it.
  double memory_bytes = 0.0;
  std::string memory_source = std::string();
};

// The share of the node's memory --hidden auto lets the model state take: the rest is the room the
// data, the batch's activations, the checkpoint's copy and the system need.
inline constexpr double kStateShareOfMemory = 0.5;

struct DataDefaults {
  bool few_shot = false;
  size_t hidden = kDefaultHidden;
  bool centroid_start = false;
  std::optional<float> lr;  // set when the data chose it (the centroid start's rate, --lr unset)
  // --infer auto: the network blended with the label centroids (train/ensemble_ranker.h) on
  // few-shot labels, where the centroids alone beat the network (bench/REPORT.md).
  bool ensemble = false;
  // The work of one epoch at the chosen width against that at kDefaultHidden.
  double step_cost_ratio = 1.0;
  // Narrower than the data would choose because the model state would not fit the memory.
  bool narrowed_for_memory = false;
  // One line for the log: what the data looks like, what was chosen, why and what it costs.
  std::string summary;
};

DataDefaults choose_data_defaults(const data::DatasetStats& stats, const DataDefaultsRequest& request);

}  // namespace frugal::run
