// An epoch's record in the metrics log and rank 0's lines about it: scores, traffic, memory, the
// step's profile, the model ranks' step times.
// Internal to train/run/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/dataset.h"
#include "comm/exchange.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/metrics_log.h"
#include "train/run/dct_cost.h"
#include "train/run/run_args.h"
#include "train/trainer.h"

namespace frugal::run {

// Parameters of the whole model, counting every slice of a sliced layer once.
// This rank's model state in bytes: its parameters' values, the optimizer's state and what layers
// derive from them (LSH tables), each part and their sum per local parameter.
nlohmann::json model_state(const Model& model, const train::Trainer& trainer);

// Each parameter's shape on this rank and in full, and the rows that had a gradient per step (before
// any data-parallel exchange): `frugal plan` models the replicas' touched-rows exchange from these.
nlohmann::json parameter_rows(const Model& model, const train::FitResult& fit);

size_t total_parameters(const Model& model);

// PSP@k needs the training label counts: none (null, "n/a") for an empty training set, and none
// without test points.
nlohmann::json psp_value(const train::EvalResult& ev, bool has_test, size_t k);

// What an epoch scored, for its record.
struct EpochScores {
  const train::EvalResult& ev;
  bool has_test = true;                 // false: no test points, the test metrics are null
  std::optional<double> valid_p1, valid_p5;  // the validation set's P@1 and P@5
  double valid_seconds = 0.0;                // scoring it (and choosing the ensemble's blend)
  float step_max = 0.0f, step_min = 0.0f;  // compute seconds per step over the model ranks
};

// The epoch's record in the metrics log (event "epoch"): training, test metrics, traffic, memory,
// the step's profile, and what --compress auto and --update-threshold did.
nlohmann::json epoch_record(const RunArgs& a, uint64_t epoch, const train::FitResult& fit, const EpochScores& scores,
                            const train::Trainer& trainer, const Model& model, int rank, uint64_t restarts);

// Rank 0's lines for an epoch: its scores, the model state's memory, and with several ranks the
// bytes on the wire, --compress auto's keeps (backoffs_said: the back-offs already reported) and the
// model ranks' step times.
void print_epoch(const RunArgs& a, uint64_t epoch, const train::FitResult& fit, const EpochScores& s, const Model& model,
                 const train::Trainer& trainer, int world_size, const Grid& grid, uint64_t& backoffs_said);

// Compute seconds per step (communication waits excluded), the slowest and fastest rank of the
// model group: what --slice-weights balances. Collective over the model group.
std::pair<float, float> model_step_times(const train::FitResult& fit, const Model& model, comm::Communicator& model_group);

// --transport-map (an mpirun job routing each kind of operation over MPI or ZeroMQ): the bytes the
// training groups sent so far over each transport ({"mpi": B, "zmq": B}); null where no group routes.
nlohmann::json transport_bytes_sent(std::initializer_list<const comm::Communicator*> groups);

nlohmann::json skipped_json(const std::vector<train::SkippedCheckpoint>& skipped);

// How many times `frugal launch --max-restarts` has restarted the job this rank belongs to
// (FRUGAL_RESTART_COUNT; unset: 0), recorded in every epoch line.
uint64_t restart_count();

}  // namespace frugal::run
