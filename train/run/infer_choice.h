// `--infer` and the ensemble's settings resolved, as `frugal train`, `predict` and `evaluate` take them:
//   --infer auto|exact|lsh|ensemble  how labels are scored at evaluation and prediction
//   --ensemble-weight F, --ensemble-knn-weight F, --ensemble-temperature T, --ensemble-neighbours N
//                                    the blend of --infer ensemble (train/ensemble_ranker.h)
// auto: in `train`, ensemble on few-shot labels and exact otherwise (train/run/data_defaults.h); in
// `predict` / `evaluate`, ensemble when the checkpoint was trained with it (its run config), else
// exact. The ensemble's weight and temperature default to the checkpoint's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/layer.h"
#include "train/ensemble_ranker.h"
#include "train/run/infer_settings.h"

namespace frugal::run {

// What the run infers with once auto is resolved.
struct InferChoice {
  InferMode mode = InferMode::exact;
  size_t candidates = InferenceOptions{}.candidates;
  train::EnsembleOptions ensemble{};
  Inference layer_mode() const { return mode == InferMode::lsh ? Inference::lsh : Inference::exact; }
};

// `auto_mode`: what auto resolves to here. `saved`: a checkpoint's run config (its ensemble
// weight and temperature are the defaults), or an empty object. Throws naming the flag when a
// value is out of range.
InferChoice resolve_infer(const InferSettings& flags, InferMode auto_mode, const nlohmann::json& saved);
// The run config's record of the choice ("infer", "infer_candidates", with the ensemble its
// "ensemble_weight", "ensemble_knn_weight", "ensemble_temperature" and "ensemble_neighbours").
void record_infer(const InferChoice& choice, nlohmann::json& config);
// The mode a run config records (exact when it records none or an unknown one).
InferMode saved_infer_mode(const nlohmann::json& saved);

}  // namespace frugal::run
