// What a run infers with, as asked (frugal train / predict / evaluate's --infer and the ensemble's
// flags; TrainConfig::infer): the mode and the blend of --infer ensemble, each unset for "auto".
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/layer.h"

namespace frugal::run {

enum class InferMode { exact, lsh, ensemble };
std::string_view to_string(InferMode mode);

struct InferSettings {
  std::optional<InferMode> mode;  // unset: auto
  size_t candidates = InferenceOptions{}.candidates;  // --infer-candidates (lsh)
  // --ensemble-weight, --ensemble-knn-weight, --ensemble-temperature, --ensemble-neighbours
  std::optional<float> weight, knn_weight, temperature;
  std::optional<size_t> neighbours;
};

}  // namespace frugal::run
