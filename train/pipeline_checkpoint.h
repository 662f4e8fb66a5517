// Checkpoints of a pipeline run (`frugal train --pipeline S`): the first stage writes the one
// slice file a 1-rank run writes (every stage sends it its parameters' records, optimizer state
// and layer states), so that `frugal predict` / `frugal evaluate` read it as they read any other,
// and a run resumes from it on any number of stages, or without a pipeline. The first stage holds
// the whole model's encoded state while it writes. Loading, each stage takes its own layers' part
// of whatever the checkpoint holds (one slice, or the slices of a model-parallel run, resliced).
// DCT-DP residuals of replicated pipelines are not saved (a resumed run starts them empty).
// Internal, like checkpoint_manifest.h.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "train/checkpoint_manifest.h"
#include "train/pipeline_trainer.h"

namespace frugal {

// Collective over the pipeline (every stage of every replica calls it).
void save_pipeline_checkpoint(const std::string& dir, const PipelineTrainer& trainer, const nlohmann::json& config,
                              const nlohmann::json& run_state, size_t keep);
// Restores this stage's layers, their optimizer state, the step and the epoch (collective over the
// pipeline); settings in both `config` and the checkpoint must agree.
CheckpointManifest load_pipeline_checkpoint(const std::string& dir, CheckpointManifest manifest,
                                            PipelineTrainer& trainer, const nlohmann::json& config);

}  // namespace frugal
