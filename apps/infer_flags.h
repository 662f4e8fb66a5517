// `--infer` and the ensemble's flags, as `frugal train`, `predict` and `evaluate` take them, into the
// run API's InferSettings (train/run/infer_settings.h):
//   --infer auto|exact|lsh|ensemble  how labels are scored at evaluation and prediction
//   --ensemble-weight F, --ensemble-knn-weight F, --ensemble-temperature T, --ensemble-neighbours N
//                                    the blend of --infer ensemble (train/ensemble_ranker.h)
// auto: in `train`, ensemble on few-shot labels and exact otherwise (train/run/data_defaults.h); in
// `predict` / `evaluate`, ensemble when the checkpoint was trained with it (its run config), else
// exact. The ensemble's weight and temperature default to the checkpoint's.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "train/run/infer_choice.h"

namespace frugal::cli {

using run::InferMode;
using run::InferSettings;

// Registers --infer, --infer-candidates and the ensemble's flags as the run API declares them
// (run::infer_options); `auto_help` says what auto means in this command.
void add_infer_options(CLI::App* cmd, InferSettings& flags, const std::string& auto_help);

}  // namespace frugal::cli
