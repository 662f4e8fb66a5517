// The best epoch of a run on its validation set, kept while the run trains and returned when it
// ends: early stopping's score and patience (train/early_stopping.h) and the best epoch's model,
// saved as a checkpoint in CHECKPOINT/best when the run has a checkpoint folder (what `frugal
// predict`, `evaluate` and Python's `frugal.load` serve from the folder: train/served_checkpoint.h)
// or else kept in memory (train/model_snapshot.h). Every trainer's epoch loop uses it, so the XMC
// network, the MLP and the pipeline stages keep and return their best the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "train/early_stopping.h"
#include "train/model_snapshot.h"

namespace frugal {
class Model;
}

namespace frugal::train {

// The score an epoch is judged by on the validation set: P@1 + P@5. P@1 alone chose epochs whose
// P@5 was 0.4-0.7 points below the run's best on the skewed synthetic sets, where P@5 keeps rising
// after P@1 peaks (bench/REPORT.md, "Validation and early stopping"); the ensemble's blend is chosen
// by the same sum (train/ensemble_choice.h).
inline double validation_score(double p1, double p5) { return p1 + p5; }

class BestEpoch {
 public:
  // `best_dir`: where the best epoch's checkpoint goes (empty: kept in memory, unless `in_memory` is
  // false: a trainer that returns no model, such as the pipeline's, only records the epoch).
  // `earlier_dir`: a resumed run's CHECKPOINT/best, where a best epoch from before the resume is.
  BestEpoch(size_t patience, std::string best_dir, std::string earlier_dir = {}, bool in_memory = true);

  // A resumed run's state (a checkpoint's run_state, best_epoch_state() below); absent: a fresh start.
  void resume(const nlohmann::json& run_state);
  // Epoch `epoch` scored `score` on validation (the same on every rank: the caller agrees on it).
  // The best so far is kept: `save(best_dir)` (collective, every rank calls it) or a snapshot.
  // Returns whether it was the best.
  // Within a long epoch (`epoch_end` false, train/run/validation_plan.h): the score at global step
  // `step`, kept the same way when it is the best.
  bool record(uint64_t epoch, double score, const Model& model, const std::function<void(const std::string&)>& save,
              uint64_t step = 0, bool epoch_end = true);
  // The same for a trainer whose model is not a Model (DLRM's network): its best is kept only in
  // best_dir (constructed with in_memory false), or recorded.
  bool record(uint64_t epoch, double score, const std::function<void(const std::string&)>& save, uint64_t step = 0,
              bool epoch_end = true);
  bool should_stop() const { return stopper_.should_stop(); }
  const EarlyStopping::State& state() const { return stopper_.state(); }
  size_t patience() const { return stopper_.patience(); }
  // What a checkpoint records of it ({"early_stopping": {...}}), so a resumed run stops where the
  // uninterrupted one would and a reader of the folder knows which epoch was best.
  nlohmann::json run_state() const;
  // The same for a checkpoint saved within an epoch, `epoch_step` steps of `batch` points into it
  // (--checkpoint-every): a resumed run skips those steps of the epoch's seeded order and goes on.
  nlohmann::json run_state(size_t epoch_step, size_t batch) const;
  // Whether a checkpoint of epoch `epoch` (completed epochs) at global step `step` is the best one.
  static bool is_best(const EarlyStopping::State& best, uint64_t epoch, uint64_t step);
  // After the last epoch (`last_epoch`): puts the best epoch's model back when it is another one,
  // from memory or with `load(dir)` (collective); returns the epoch the model now is. A best epoch
  // from before a resume with no CHECKPOINT/best to load stays unloaded (the last is returned).
  uint64_t restore(Model& model, uint64_t last_epoch, const std::function<void(const std::string&)>& load);
  // Where the best epoch's checkpoint is (empty: it is kept in memory).
  const std::string& best_dir() const { return best_dir_; }

 private:
  EarlyStopping stopper_;
  std::string best_dir_, earlier_dir_;
  bool in_memory_ = true;
  ModelSnapshot snapshot_;
  uint64_t snapshot_epoch_ = 0, snapshot_step_ = 0;
};

// The steps of its epoch a checkpoint's run_state says were done (0: saved at an epoch's end, or
// before checkpoints said). A value that is not a step count is refused, naming the field.
size_t epoch_step_of(const nlohmann::json& run_state);
// The batch those steps had (0: not recorded).
size_t epoch_batch_of(const nlohmann::json& run_state);

}  // namespace frugal::train
