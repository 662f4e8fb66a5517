// What a run scores its epochs with (Scoring: propensities from the training label counts, --infer
// ensemble's members) and what it hands back (TrainedModel: this rank's model, its trainer and the
// groups they train in, alive after the run for RunResult::evaluate / predict). Internal.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/data/label_centroids.h"
#include "core/data/nearest_points.h"
#include "core/model.h"
#include "core/propensity.h"
#include "train/ensemble_choice.h"
#include "train/ensemble_ranker.h"
#include "train/run/run_args.h"
#include "train/trainer.h"

namespace frugal::run {

// --infer ensemble: the label centroids and nearest training points of the training set, on every
// rank (each ranks the whole batch the same way), and next to the checkpoint for predict / evaluate.
// The ranker points at the members: the struct stays where it was made.
struct Ensemble {
  std::optional<data::LabelCentroids> centroids;
  std::optional<data::NearestPoints> points;
  std::optional<train::EnsembleRanker> ranker;
};
// `all_members`: both members whatever their weight (the blend is chosen on validation).
void build_ensemble(const RunArgs& a, const data::Dataset& train, Ensemble& e, bool all_members = false);

// Whether the run chooses --infer ensemble's blend on its validation set each epoch
// (train/ensemble_choice.h): it infers with the ensemble and no share or temperature was given.
bool chooses_blend(const RunArgs& a, const data::Dataset* valid);

// What each epoch's evaluation scores with. Propensity-scored metrics weigh hits by the training
// label counts; the counts are kept next to the checkpoint so a saved model can be scored the same
// way without its training file (an empty training set has none: PSP@k is left out). --infer
// ensemble's members. Made where it stays: the options point into it.
struct Scoring {
  LabelCounts label_counts;
  std::optional<Propensities> propensities;
  Ensemble ensemble;
  train::EvalOptions options;
  // The blend chosen on `valid` each epoch (chooses_blend), else null.
  std::unique_ptr<train::EnsembleChoice> choice;
  // `counts`: the training set's label counts where `train` is not the whole set (a streamed one's
  // first block: train/run/run.cpp, RunData), else null (counted from `train`).
  Scoring(const RunArgs& a, const data::Dataset& train, const data::Dataset* valid = nullptr,
          const LabelCounts* counts = nullptr);
  // The grid's blend `index` (EnsembleChoice) as the one the epoch's evaluations blend with.
  void use_blend(size_t index);
  Scoring(const Scoring&) = delete;
  Scoring& operator=(const Scoring&) = delete;

  // Writes this run's files beside the checkpoint folder `dir` (label counts, the ensemble's
  // members; rank 0 alone), once per folder, right before the run's first checkpoint there: a run
  // that fails before it leaves the folder's last good checkpoint and its files as they were. A
  // member file that an earlier run left and this one does not write goes, or this run's manifest
  // would record it as its own (train/checkpoint_manifest.h, verify_member_file).
  void keep_beside(const std::string& dir, int rank) const;

 private:
  mutable std::set<std::string> kept_in_;
};

// An epoch's choice of the ensemble's blend on the validation set: the chosen one and the run's
// base blend (the defaults, or the checkpoint's), both scored on the validation set.
struct BlendChosen {
  train::EnsembleScore chosen, base;
};
// Scores the grid with `trainer`'s network, takes rank 0's choice on every rank of `world` and
// makes it the blend `scoring` evaluates with.
BlendChosen choose_blend(Scoring& scoring, train::Trainer& trainer, comm::Communicator& world);
std::string describe_blend(const BlendChosen& b);     // the log's line
nlohmann::json blend_record(const BlendChosen& b);    // the epoch record's "ensemble_choice"

// This rank's trained model and everything it computes through (members in the order they are
// made: the trainer, made last, goes first).
class TrainedModel {
 public:
  std::unique_ptr<comm::Communicator> world, model_group, data_group;
  std::vector<std::unique_ptr<comm::Communicator>> retired;  // groups --slice-weights auto replaced
  Model model;
  std::unique_ptr<Scoring> scoring;
  std::optional<train::Trainer> trainer;
};

// An epoch's record (the metrics log's line) handed to the caller: kept in `result` and passed to
// callbacks->on_epoch. Returns whether the run goes on: false when on_epoch asked to stop on any rank
// of `world` (collective over it when it has several ranks, so that every rank stops together).
bool report_epoch(const nlohmann::json& line, const RunCallbacks* callbacks, RunResult& result,
                  comm::Communicator* world);

}  // namespace frugal::run
