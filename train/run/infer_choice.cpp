#include "apps/infer_flags.h"

#include <fmt/format.h>

#include "apps/cli_options.h"

namespace frugal::cli {

std::string_view to_string(InferMode mode) {
  switch (mode) {
    case InferMode::exact: return "exact";
    case InferMode::lsh: return "lsh";
    case InferMode::ensemble: return "ensemble";
  }
  return "exact";
}

void add_infer_options(CLI::App* cmd, InferFlags& flags, const std::string& auto_help) {
  add_choice(cmd, "--infer", flags.mode,
             {{"auto", std::nullopt}, {"exact", InferMode::exact}, {"lsh", InferMode::lsh},
              {"ensemble", InferMode::ensemble}},
             "how labels are scored: exact (every label), lsh (the labels LSH tables over the output rows return: "
             "faster, approximate), ensemble (the network blended with each label's centroid of its training "
             "points' features, kept with the checkpoint), auto: " + auto_help);
  cmd->add_option("--infer-candidates", flags.candidates, "--infer lsh: labels scored per point at most, those found "
                                                          "in the most tables (0: all the tables return)")
      ->capture_default_str();
  cmd->add_option("--ensemble-weight", flags.weight,
                  fmt::format("--infer ensemble: the label centroids' share of the blended probability, 0 to 1 "
                              "(default {:g}, or the checkpoint's)", EnsembleOptions{}.weight));
  cmd->add_option("--ensemble-knn-weight", flags.knn_weight,
                  fmt::format("--infer ensemble: the nearest training points' share, 0 to 1 (default {:g}, or the "
                              "checkpoint's); the network's share is what the two leave", EnsembleOptions{}.knn_weight));
  cmd->add_option("--ensemble-temperature", flags.temperature,
                  fmt::format("--infer ensemble: temperature of the softmax over the centroids' cosines and the "
                              "neighbours' votes (default {:g}, or the checkpoint's)", EnsembleOptions{}.temperature));
  cmd->add_option("--ensemble-neighbours", flags.neighbours,
                  fmt::format("--infer ensemble: training points that vote for their labels (default {}, or the "
                              "checkpoint's)", EnsembleOptions{}.neighbours));
}

InferMode saved_infer_mode(const nlohmann::json& saved) {
  if (!saved.is_object() || !saved.contains("infer") || !saved["infer"].is_string()) return InferMode::exact;
  const std::string mode = saved["infer"].get<std::string>();
  return mode == "ensemble" ? InferMode::ensemble : mode == "lsh" ? InferMode::lsh : InferMode::exact;
}

InferChoice resolve_infer(const InferFlags& flags, InferMode auto_mode, const nlohmann::json& saved) {
  InferChoice c;
  c.mode = flags.mode.value_or(auto_mode);
  c.candidates = flags.candidates;
  const auto saved_float = [&](const char* key, float fallback) {
    return saved.is_object() && saved.contains(key) && saved[key].is_number() ? saved[key].get<float>() : fallback;
  };
  c.ensemble.weight = flags.weight.value_or(saved_float("ensemble_weight", EnsembleOptions{}.weight));
  c.ensemble.knn_weight = flags.knn_weight.value_or(saved_float("ensemble_knn_weight", EnsembleOptions{}.knn_weight));
  c.ensemble.temperature = flags.temperature.value_or(saved_float("ensemble_temperature", EnsembleOptions{}.temperature));
  c.ensemble.neighbours = flags.neighbours.value_or(
      saved.is_object() && saved.contains("ensemble_neighbours") && saved["ensemble_neighbours"].is_number_unsigned()
          ? saved["ensemble_neighbours"].get<size_t>()
          : EnsembleOptions{}.neighbours);
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

}  // namespace frugal::cli
