// A run's settings as the run resolves them: the caller's TrainConfig, and what the run decides
// from the data, the checkpoint and the cluster (the optimizer auto picks, the data's defaults, the
// grid, the inference choice). Internal to train/run/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dataset.h"
#include "train/run/infer_choice.h"
#include "train/run/run.h"
#include "train/run/train_config.h"
#include "train/run/validation_plan.h"

namespace frugal::run {

// The process grid: D data-parallel replicas x M ranks slicing the model (x S pipeline stages).
struct Grid {
  int data = 1, model = 1, stages = 1;
};

struct RunArgs : TrainConfig {
  explicit RunArgs(const TrainConfig& c) : TrainConfig(c) {}
  // TrainConfig::settings as the run config records them (compared at rendezvous).
  nlohmann::json flag_settings = nlohmann::json::object();
  // Data given in memory (run::train's overload) instead of the files of `train` and `test`.
  std::optional<data::Dataset> train_data, test_data;
  const RunCallbacks* callbacks = nullptr;
  InferChoice inference;                        // `infer` resolved (apply_data_defaults)
  OutputInit output_start = OutputInit::random;  // `output_init` resolved
  std::string data_defaults_line;               // what apply_data_defaults chose and why
  // `grid` and `slice_weights` parsed (parse_grid_and_weights).
  std::optional<Grid> grid_shape;
  std::vector<double> weights;
  bool auto_weights = false;
  optim::Method method = optim::Method::adam;  // `optimizer` resolved (resolve_optimizer)
  bool precision_from_cpu = false;             // `precision` auto, decided by this CPU (resolve_precision)
  bool optimizer_from_checkpoint = false;      // auto took --resume's
  ValidationPlan validation;                   // --valid-fraction, --valid, --early-stopping, --epochs resolved
  size_t train_points = 0;  // the points the run trains on (the training set less its validation share)
  optim::ScheduleKind schedule = optim::ScheduleKind::constant;  // --lr-schedule resolved
};

// The whole run on this rank (train/run/xmc_run.cpp): the XMC network, the MLP, the pipeline or
// DLRM as the settings say.
RunResult run_training(RunArgs a);

}  // namespace frugal::run
