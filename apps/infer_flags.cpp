#include "apps/infer_flags.h"

#include <fmt/format.h>

#include "apps/cli_options.h"

namespace frugal::cli {

void add_infer_options(CLI::App* cmd, InferSettings& flags, const std::string& auto_help) {
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

}  // namespace frugal::cli
