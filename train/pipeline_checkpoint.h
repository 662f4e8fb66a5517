// Checkpoints of a pipeline run (`frugal train --pipeline S`): the first stage writes the slice
// files a run of M model slices without a pipeline writes (one when the stages are whole; rank m of
// every stage sends rank m of the first stage its parameters' records, optimizer state and layer
// states), so that `frugal predict` / `frugal evaluate` read them as any other, and a run resumes
// from them on any number of stages and slices, or without a pipeline. The first stage's ranks
// hold their slice of the whole model's encoded state while they write. Loading, each stage takes its own layers' part
// of whatever the checkpoint holds (one slice, or the slices of a model-parallel run, resliced).
// DCT-DP residuals of replicated pipelines are not saved (a resumed run starts them empty).
// Internal, like checkpoint_manifest.h.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "train/checkpoint_manifest.h"
#include "train/pipeline_trainer.h"

namespace frugal::train {

// Collective over the pipeline (every stage of every replica calls it).
void save_pipeline_checkpoint(const std::string& dir, const PipelineTrainer& trainer, const nlohmann::json& config,
                              const nlohmann::json& run_state, size_t keep);
// Restores this stage's layers, their optimizer state, the step and the epoch (collective over the
// pipeline); settings in both `config` and the checkpoint must agree.
CheckpointManifest load_pipeline_checkpoint(const std::string& dir, CheckpointManifest manifest,
                                            PipelineTrainer& trainer, const nlohmann::json& config);

}  // namespace frugal::train
