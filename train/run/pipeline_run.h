// `frugal train --pipeline S`: the network's layers split into S contiguous stages on S ranks
// (train/pipeline_trainer.h), micro-batches in a 1F1B schedule, data-parallel replicas of the whole
// pipeline and stages sliced over M ranks with `--grid DxMxS`. the run API (train/run/run.cpp) resolves the settings
// shared with the other modes and calls run_pipeline with what they became; this file splits the layers, runs the epochs, prints
// and logs them and saves / resumes checkpoints (train/pipeline_checkpoint.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/communicator.h"
#include "core/dataset.h"
#include "layers/network_spec.h"
#include "train/run/stage_split.h"
#include "train/pipeline_trainer.h"

namespace frugal {
class Backend;
}

namespace frugal::run {

struct PipelineRun {
  // Called on every rank before each checkpoint into the folder (the files kept beside it).
  std::function<void(const std::string& dir)> before_checkpoint;
  const data::Dataset* train = nullptr;
  const data::Dataset* test = nullptr;
  const data::Dataset* valid = nullptr;  // the validation set (null: none)
  size_t patience = 0;                   // --early-stopping resolved
  layers::NetworkSpec spec;
  Backend* backend = nullptr;
  int stages = 1, replicas = 1;
  int slices = 1;                   // ranks slicing each stage's layers (--grid DxMxS)
  std::vector<size_t> stage_split;  // layers per stage as given (empty: auto)
  train::PipelineOptions options;          // groups, first layer and layer count filled by run_pipeline
  size_t batch = 128, epochs = 3, eval_batch = 512, max_steps = 0;
  uint64_t seed = 1;
  bool quiet = false;
  train::EvalOptions eval;  // what each epoch's evaluation computes (ensemble and propensities included)
  bool centroid_init = false;
  float centroid_scale = 10.0f;
  std::string metrics, checkpoint, resume;
  size_t keep_checkpoints = 2;
  bool accept_unchecked_checkpoint = false;
  nlohmann::json start_config;       // the rendezvous config (the start record's "config")
  nlohmann::json checkpoint_config;  // what checkpoints record (and --resume compares)
  uint64_t restarts = 0;
  // After each epoch, with its record (every rank): false stops the run after its checkpoint.
  std::function<bool(const nlohmann::json&)> on_epoch;
};

// Returns the epoch of the model the run leaves: the best on validation (CHECKPOINT serves it).
uint64_t run_pipeline(comm::Communicator& world, PipelineRun run);

}  // namespace frugal::run
