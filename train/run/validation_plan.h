// How much of the training set a run holds back to watch (a validation split), and how long it
// waits for the watched score to improve before it stops: the defaults of --valid-fraction and
// --early-stopping, decided here once for every face and trainer.
//
// Why a split by default: the row-wise Adam default learns fast and then overfits real data (a
// held-out 39k-label set: best P@1 after epoch 2 of 5, the last epoch 5 points lower; GCIDE min5: the
// training loss falls from 2.9 to 0.07 after the first epoch while test P@1 stays flat). Holding back
// 5% costs 0.1-0.2 points of P@1 there (bench/REPORT.md, "Validation and early stopping") and lets the
// run return its best epoch instead of its last. Small sets turn it off: a few hundred held-back
// points score too noisily to choose an epoch by, and every training point counts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/data/ctr_split.h"
#include "core/data/dataset_split.h"
#include "core/data/point_stream.h"
#include "core/optim/lr_schedule.h"

namespace frugal::run {

// The share held back by default, and the bounds on the points it holds.
inline constexpr double kAutoValidShare = 0.05;
inline constexpr size_t kAutoValidMinTrain = 5000;   // fewer training points: no split by default
inline constexpr size_t kAutoValidMinPoints = 1000;  // at least this many (at most 10% of the set)
inline constexpr size_t kAutoValidMaxPoints = 20000;
// --early-stopping's default patience (epochs without a better validation score), where a
// validation split or file exists (bench/quality, "Validation and early stopping").
inline constexpr size_t kDefaultPatience = 2;
// --epochs auto: the upper bound when early stopping watches a validation set (the run stops once
// the score has not improved for the patience: 5.3-8.3 epochs on the bench/quality sets), and the
// count without one (the default from before the split).
inline constexpr size_t kAutoEpochCap = 10;
inline constexpr size_t kDefaultEpochs = 3;

struct ValidationPlan {
  double fraction = 0.0;  // of the training set held back (0: none)
  bool file = false;      // --valid FILE is scored instead
  size_t patience = 0;    // --early-stopping resolved (0: off)
  size_t epochs = kDefaultEpochs;  // --epochs resolved
  std::string line;       // what the log says about the choice (empty: nothing to say)
  bool on() const { return fraction > 0.0 || file; }
};

// `fraction`: --valid-fraction as given (unset: auto); `valid_file`: --valid FILE was given;
// `patience`: --early-stopping as given (unset: auto); `points`: the training set's size;
// `epochs`: --epochs as given (unset: auto). Refuses --early-stopping N > 0 with nothing to watch,
// naming the flags.
ValidationPlan plan_validation(std::optional<double> fraction, bool valid_file, std::optional<size_t> patience,
                               size_t points, std::optional<size_t> epochs = std::nullopt);

// --valid-every auto: the training steps a long epoch runs between scorings of the validation set
// (besides its end; 0: none). The points trained between two scorings are the validation set's size
// over kAutoValidShare: what an epoch of a set whose split is the default 5% trains between two, so
// a scoring costs the same share of the training time wherever it happens (2-9% on the bench/quality
// sets). An epoch of up to 400,000 points is scored at its end only; one of 1.7M points (a
// 20,000-point split) about every 400,000 points. `given`: --valid-every as given (unset: auto; 0:
// epoch ends only); `batch`: the points of a step (replicas share a step's batch).
size_t valid_every_steps(std::optional<size_t> given, size_t valid_points, size_t batch, size_t steps_per_epoch);

// --lr-schedule auto: cosine over the epoch bound where early stopping watches a validation set,
// constant otherwise. Measured on the validation bench (bench/quality/validation.py, 3 seeds, the
// 10-epoch bound): cosine returned +1.0 P@1 on Fashion-MNIST and +0.2 P@1 / +1.3 P@5 on the skewed
// synthetic sets against the constant rate (which early stopping stopped after 5-8 epochs).
optim::ScheduleKind auto_schedule(const ValidationPlan& plan);

// --resume without --valid-fraction (or --valid): the checkpoint's share (`saved`: its configuration),
// so the resumed run holds back the same points; `given` otherwise.
std::optional<double> resumed_valid_fraction(std::optional<double> given, bool valid_file, const nlohmann::json& saved);
// --resume with --lr-schedule auto: the checkpoint's schedule (its rates continue as they were).
std::optional<optim::ScheduleKind> resumed_schedule(const nlohmann::json& saved);

// The held-back split of a run with seed `seed`: label-stratified, the same on every rank, for
// every rank count and on --resume (it depends on the data, the fraction and the seed only).
data::Split hold_back(const data::Dataset& train, double fraction, uint64_t seed);
// The same for a streamed packed points file (core/data/point_stream.h): round(fraction x its
// points) held back, label-stratified, from seeded blocks (the file is never read whole).
data::PointHeldBack hold_back(data::PackedReader& train, double fraction, uint64_t seed);
// The same for a click log (DLRM): stratified by the click label.
data::CtrSplit hold_back(const data::CtrDataset& train, double fraction, uint64_t seed);

}  // namespace frugal::run
