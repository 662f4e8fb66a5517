// `--infer` and the ensemble's flags, as `frugal train`, `predict` and `evaluate` take them:
//   --infer auto|exact|lsh|ensemble  how labels are scored at evaluation and prediction
//   --ensemble-weight F, --ensemble-knn-weight F, --ensemble-temperature T, --ensemble-neighbours N
//                                    the blend of --infer ensemble (train/ensemble_ranker.h)
// auto: in `train`, ensemble on few-shot labels and exact otherwise (apps/data_defaults.h); in
// `predict` / `evaluate`, ensemble when the checkpoint was trained with it (its run config), else
// exact. The ensemble's weight and temperature default to the checkpoint's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/layer.h"
#include "train/ensemble_ranker.h"

namespace frugal::cli {

enum class InferMode { exact, lsh, ensemble };
std::string_view to_string(InferMode mode);

struct InferFlags {
  std::optional<InferMode> mode;  // unset: auto
  size_t candidates = InferenceOptions{}.candidates;  // --infer-candidates (lsh)
  // --ensemble-weight, --ensemble-knn-weight, --ensemble-temperature, --ensemble-neighbours
  std::optional<float> weight, knn_weight, temperature;
  std::optional<size_t> neighbours;
};

// Registers --infer, --infer-candidates and the ensemble's flags; `auto_help` says what auto means
// in this command.
void add_infer_options(CLI::App* cmd, InferFlags& flags, const std::string& auto_help);

// What the run infers with once auto is resolved.
struct InferChoice {
  InferMode mode = InferMode::exact;
  size_t candidates = InferenceOptions{}.candidates;
  EnsembleOptions ensemble{};
  Inference layer_mode() const { return mode == InferMode::lsh ? Inference::lsh : Inference::exact; }
};

// `auto_mode`: what auto resolves to here. `saved`: a checkpoint's run config (its ensemble
// weight and temperature are the defaults), or an empty object. Throws naming the flag when a
// value is out of range.
InferChoice resolve_infer(const InferFlags& flags, InferMode auto_mode, const nlohmann::json& saved);
// The run config's record of the choice ("infer", "infer_candidates", with the ensemble its
// "ensemble_weight", "ensemble_knn_weight", "ensemble_temperature" and "ensemble_neighbours").
void record_infer(const InferChoice& choice, nlohmann::json& config);
// The mode a run config records (exact when it records none or an unknown one).
InferMode saved_infer_mode(const nlohmann::json& saved);

}  // namespace frugal::cli
