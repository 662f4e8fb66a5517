// What rank 0 says about a run's settings: combinations that do less than they seem to, and what
// --optimizer auto and --compress auto chose.
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

// --dp-momentum-correction where nothing is held back: every velocity is sent every step and
// restarts at 0, so the optimizer simply runs without momentum (rank 0 says it).
void note_momentum_correction(const RunArgs& a, int replicas);

// What --precision bf16 leaves in f32 (rank 0 says it). bf16_products: the backend multiplies
// dense operands in bf16 (the CUDA backend's tensor cores; the CPU's bf16 matmul where --bf16-dot is
// active).
void note_precision(const RunArgs& a, bool bf16_products);

// DCT-MP's straight-through estimate at every boundary of a network with stacked hidden layers:
// its bias compounds through them (bench/REPORT.md, "DCT-MP with one-byte values").
void note_straight_through(const RunArgs& a, int model_ranks);

// A model trained on the CUDA backend alone (one model rank; in a mixed group the calibrated
// shares weigh the GPU by its measured speed): what is known of its speed (rank 0 says it).
void note_cuda_alone(const RunArgs& a, const Backend& backend, int model_ranks);

// --overlap-forward on where no split can happen says so.
void note_forward_split(const RunArgs& a, int model_ranks);

// What --compress auto does on this grid (rank 0 says it once).
void note_compress(const RunArgs& a, const Grid& grid);

// What the optimizer became: rank 0 says what --optimizer auto chose, and where a row-wise optimizer
// falls back to per-element state.
void note_optimizer(const RunArgs& a, const train::Trainer& trainer, int rank);

}  // namespace frugal::run
