#include "train/run/infer_choice.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::run {

std::string_view to_string(InferMode mode) {
  switch (mode) {
    case InferMode::exact: return "exact";
    case InferMode::lsh: return "lsh";
    case InferMode::ensemble: return "ensemble";
  }
  return "exact";
}

InferMode saved_infer_mode(const nlohmann::json& saved) {
  if (!saved.is_object() || !saved.contains("infer") || !saved["infer"].is_string()) return InferMode::exact;
  const std::string mode = saved["infer"].get<std::string>();
  return mode == "ensemble" ? InferMode::ensemble : mode == "lsh" ? InferMode::lsh : InferMode::exact;
}

InferChoice resolve_infer(const InferSettings& flags, InferMode auto_mode, const nlohmann::json& saved) {
  InferChoice c;
  c.mode = flags.mode.value_or(auto_mode);
  c.candidates = flags.candidates;
  const auto saved_float = [&](const char* key, float fallback) {
    return saved.is_object() && saved.contains(key) && saved[key].is_number() ? saved[key].get<float>() : fallback;
  };
  c.ensemble.weight = flags.weight.value_or(saved_float("ensemble_weight", train::EnsembleOptions{}.weight));
  c.ensemble.knn_weight = flags.knn_weight.value_or(saved_float("ensemble_knn_weight", train::EnsembleOptions{}.knn_weight));
  c.ensemble.temperature = flags.temperature.value_or(saved_float("ensemble_temperature", train::EnsembleOptions{}.temperature));
  c.ensemble.neighbours = flags.neighbours.value_or(
      saved.is_object() && saved.contains("ensemble_neighbours") && saved["ensemble_neighbours"].is_number_unsigned()
          ? saved["ensemble_neighbours"].get<size_t>()
          : train::EnsembleOptions{}.neighbours);
  c.ensemble.validate();
  if (c.mode != InferMode::ensemble && (flags.weight || flags.knn_weight || flags.temperature || flags.neighbours))
    throw Error(fmt::format("{} is for --infer ensemble (this run infers {})",
                            flags.weight       ? "--ensemble-weight"
                            : flags.knn_weight ? "--ensemble-knn-weight"
                            : flags.temperature ? "--ensemble-temperature"
                                                : "--ensemble-neighbours",
                            to_string(c.mode)));
  return c;
}

void record_infer(const InferChoice& choice, nlohmann::json& config) {
  config["infer"] = std::string(to_string(choice.mode));
  config["infer_candidates"] = choice.candidates;
  if (choice.mode == InferMode::ensemble) {
    config["ensemble_weight"] = choice.ensemble.weight;
    config["ensemble_knn_weight"] = choice.ensemble.knn_weight;
    config["ensemble_temperature"] = choice.ensemble.temperature;
    config["ensemble_neighbours"] = choice.ensemble.neighbours;
  }
}

}  // namespace frugal::run
