// The run API: what `frugal train` does, as one call. It checks the data, resolves the defaults
// from it (train/run/data_defaults.h), builds the network (XMC, MLP or DLRM), places it on its
// device, joins the ranks of the run into the grid or pipeline the config asks for, chooses
// compression from the link, resumes with every check, trains, evaluates after every epoch,
// checkpoints and keeps the ensemble's members beside the checkpoints. The command line and the
// Python module are faces over it; a C++ program calls it the same way:
//
//   frugal::run::TrainConfig cfg;                        // every option, the command line's defaults
//   cfg.train = "train.txt"; cfg.test = "test.txt"; cfg.epochs = 5;
//   auto result = frugal::run::train(cfg, {.on_epoch = [](const frugal::run::EpochRecord& r) {
//     std::printf("epoch %llu: P@1 %.4f\n", (unsigned long long)r.epoch, r.p_at(1));
//     return true;                                       // false: stop after this epoch
//   }});
//   auto top = result.predict(frugal::data::XmcFile::open("new.txt"), 5);
//
// Under `frugal launch` or mpirun every rank calls it with the same config (the ranks compare their
// settings before the first step and name the one that differs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dataset.h"
#include "train/predictor.h"
#include "train/run/train_config.h"
#include "train/trainer.h"

namespace frugal::run {

// One epoch's record: the metrics log's "epoch" line (json: every field of it, docs/metrics.md)
// and the figures most callers want. Test metrics are absent without test points.
struct EpochRecord {
  uint64_t epoch = 0;
  int rank = 0;  // the rank whose record it is (every rank gets its own)
  double loss = 0.0, train_samples_per_s = 0.0;
  std::optional<double> p1, p3, p5, valid_p1;
  std::optional<double> auc, logloss;  // --model dlrm's test metrics
  std::string json;
  double p_at(size_t k) const;  // P@1, 3 or 5 (NaN without test points)
};

struct RunCallbacks {
  // Rank 0's progress lines and notes (without: stdout), and warnings and progress bars (without:
  // stderr). Each call is a piece of text ending in a newline.
  std::function<void(std::string_view)> on_output{}, on_notice{};
  // After every epoch, on every rank: false stops the run after this epoch (its checkpoint written),
  // and the model trained so far is returned.
  std::function<bool(const EpochRecord&)> on_epoch{};
};

class TrainedModel;

// What a run returns: its epochs, and the trained model (this rank's part of it) to evaluate and
// predict with, as `frugal evaluate` / `predict` would from its checkpoint.
struct RunResult {
  std::vector<EpochRecord> epochs;
  // The epoch whose model `model` holds: the last one trained, or with a validation set the best
  // (from memory or its checkpoint, DIR/best), and the global step within it when a long epoch's
  // best was scored before its end (--valid-every; 0: at the epoch's end).
  uint64_t model_epoch = 0, model_step = 0;
  bool left_out = false;  // --slice-weights auto left this rank out of the model
  std::shared_ptr<TrainedModel> model;  // null for DLRM, the pipeline and a rank left out
  train::EvalResult evaluate(const data::Dataset& data) const;
  train::Predictions predict(const data::Dataset& data, size_t k) const;
};

// Trains on the files config.train and config.test name.
RunResult train(const TrainConfig& config, const RunCallbacks& callbacks = {});
// Trains on data in memory (moved in); config.train / config.test name them in messages.
RunResult train(const TrainConfig& config, data::Dataset train_set, data::Dataset test_set,
                const RunCallbacks& callbacks = {});

}  // namespace frugal::run
