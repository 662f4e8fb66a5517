// The model state a run's XMC network will hold on the host (weights, optimizer moments and row
// counters, LSH tables), estimated from the flags and the data's shape before the network is built:
// what `--hidden auto` keeps within the node's memory, and what its log line says a width costs.
// It is linear in the hidden width (every weight row is `hidden` wide; the tables and the per-row
// state are not), so one estimate answers for every width. tests/apps/test_hidden_auto_memory.sh checks
// it against the `model_state_bytes` a run reports.
#pragma once

#include <cstddef>

#include "core/data/dataset_stats.h"
#include "train/run/run_args.h"

namespace frugal::run {

struct StateEstimate {
  double per_width = 0.0;  // bytes per unit of hidden width (weights and their moments)
  double fixed = 0.0;      // bytes at any width (per-row moments and counters, LSH tables, biases)
  double at(size_t hidden) const { return per_width * static_cast<double>(hidden) + fixed; }
};

// One hidden layer of any width between a sparse input of stats.features and stats.labels outputs,
// as `a` trains it (--precision, the resolved optimizer, --sampler, --tables).
StateEstimate estimate_state(const RunArgs& a, const data::DatasetStats& stats);

}  // namespace frugal::run
