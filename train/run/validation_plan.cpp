#include "train/run/validation_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/packed_file.h"
#include "core/rng.h"

namespace frugal::run {

ValidationPlan plan_validation(std::optional<double> fraction, bool valid_file, std::optional<size_t> patience,
                               size_t points, std::optional<size_t> epochs) {
  ValidationPlan plan;
  FRUGAL_CHECK(!valid_file || !fraction || *fraction == 0.0,
               fmt::format("--valid FILE and --valid-fraction {} both name a validation set: give one (--valid-fraction "
                           "0 with --valid is allowed)", *fraction));
  if (valid_file) {
    plan.file = true;
  } else if (fraction) {
    plan.fraction = *fraction;
  } else if (points < kAutoValidMinTrain) {
    plan.line = fmt::format("validation: off by default, the training set has {} points (fewer than {}); "
                            "--valid-fraction F holds back a share anyway", points, kAutoValidMinTrain);
  } else {
    const double share = static_cast<double>(points) * kAutoValidShare;
    const double held = std::min(static_cast<double>(kAutoValidMaxPoints),
                                 std::max(share, std::min(static_cast<double>(kAutoValidMinPoints),
                                                          0.1 * static_cast<double>(points))));
    plan.fraction = held / static_cast<double>(points);
  }
  if (patience) {
    FRUGAL_CHECK(*patience == 0 || plan.on(),
                 fmt::format("--early-stopping {} watches a validation set, and this run has none: give --valid-fraction "
                             "F or --valid FILE{}", *patience,
                             !fraction && !valid_file ? fmt::format(" (the default holds none back from a set of fewer than {} points)",
                                                                    kAutoValidMinTrain)
                                                      : ""));
    plan.patience = *patience;
  } else {
    plan.patience = plan.on() ? kDefaultPatience : 0;
  }
  plan.epochs = epochs.value_or(plan.patience > 0 ? kAutoEpochCap : kDefaultEpochs);
  return plan;
}

size_t valid_every_steps(std::optional<size_t> given, size_t valid_points, size_t batch, size_t steps_per_epoch) {
  if (valid_points == 0 || batch == 0) return 0;
  const size_t every = given.value_or(static_cast<size_t>(
      std::ceil(static_cast<double>(valid_points) / kAutoValidShare / static_cast<double>(batch))));
  return every < steps_per_epoch ? every : 0;
}

optim::ScheduleKind auto_schedule(const ValidationPlan& plan) {
  return plan.patience > 0 ? optim::ScheduleKind::cosine : optim::ScheduleKind::constant;
}

std::optional<double> resumed_valid_fraction(std::optional<double> given, bool valid_file, const nlohmann::json& saved) {
  if (given || valid_file || !saved.is_object() || !saved.contains("valid_fraction") || !saved["valid_fraction"].is_number())
    return given;
  return saved["valid_fraction"].get<double>();
}

std::optional<optim::ScheduleKind> resumed_schedule(const nlohmann::json& saved) {
  if (!saved.is_object() || !saved.contains("lr_schedule") || !saved["lr_schedule"].is_string()) return std::nullopt;
  try {
    return optim::schedule_kind_from_string(saved["lr_schedule"].get<std::string>());
  } catch (const Error&) {
    return std::nullopt;  // an unknown name: the resume's settings check names it
  }
}

namespace {
// The split's seed: derived from the run's, so that it is not the training shuffle's.
uint64_t split_seed(uint64_t seed) { return Rng(seed).split(0x7a11d).next_u64(); }
}  // namespace

data::Split hold_back(const data::Dataset& train, double fraction, uint64_t seed) {
  return data::split(train, {.test_fraction = fraction, .seed = split_seed(seed), .stratified = true});
}

data::PointHeldBack hold_back(data::PackedReader& train, double fraction, uint64_t seed) {
  const auto count = static_cast<size_t>(std::llround(fraction * static_cast<double>(train.header().points)));
  return data::hold_back_point_blocks(train, count, {.test_fraction = fraction, .seed = split_seed(seed),
                                                     .stratified = true});
}

data::CtrSplit hold_back(const data::CtrDataset& train, double fraction, uint64_t seed) {
  return data::split_ctr(train, fraction, split_seed(seed));
}

}  // namespace frugal::run
