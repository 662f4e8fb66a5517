// How `frugal train --pipeline S` splits the network's layers into stages and cuts a batch into
// micro-batches: shared by the run (train/run/pipeline_run.h) and the planner's pipeline plans
// (apps/plan/cost_model.h), so that a plan names the split a run takes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace frugal::run {

// --stage-split W1,W2,...: layers per stage (they sum to the network's layer count); empty: auto.
// Auto balances layers::layer_costs over the stages (a stage before the last computes its forward
// passes twice, recomputing them before the backward: its cost counts 4/3).
std::vector<size_t> split_stages(const std::vector<double>& layer_costs, size_t stages,
                                 const std::vector<size_t>& given = {});
// Parses --stage-split: "auto" (empty result) or positive layer counts.
std::vector<size_t> parse_stage_split(const std::string& text);
// Micro-batches when --micro-batches is not given: 2 per stage (the 1F1B bubble (S-1)/(N+S-1) at
// most 1/3), fewer where a micro-batch would have under 16 points.
size_t default_micro_batches(size_t stages, size_t batch);

}  // namespace frugal::run
