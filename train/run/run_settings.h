// The settings of a run resolved and checked: the optimizer auto picks and its rate, the grid, the
// network, what checkpoints record, the data's defaults, the memory check, the face's checks.
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
#include "core/data/dataset_stats.h"
#include "comm/exchange.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/metrics_log.h"
#include "train/run/dct_cost.h"
#include "train/run/run_args.h"
#include "train/trainer.h"

namespace frugal::run {

float effective_lr(const RunArgs& a);

// --optimizer auto (the default): row-wise Adam where the output layer is a sampled (LSH) softmax,
// the huge row-sparse table whose few touched rows a step updates, as FBGEMM's embedding tables;
// Adam elsewhere (an exact softmax, Fashion-MNIST's IDX images, --model dlrm). Measured
// (docs/optimizers.md): row-wise Adam ends 3 epochs of the synthetic 100k-label sets 6 points of
// P@1 above Adam (3 seeds) and the long-tail sets 14 points above (3 sets); on Fashion-MNIST (exact
// softmax, every input row touched each step) it lost 1.1 points.
optim::Method auto_optimizer(const RunArgs& a);

// auto with --resume: the checkpoint's optimizer (its state is what the files hold; a run saved
// before auto existed, or with another choice, resumes as it was trained).
void resolve_optimizer(RunArgs& a);

// --precision auto (the default): bf16 storage of the sparse input layer's and the LSH softmax's
// weights and moments where the LSH network trains on a CPU with AVX512-BF16 (its vdpbf16ps
// multiplies the stored rows as they are: --bf16-dot), f32 otherwise: the exact softmax keeps its
// whole matrix in f32 (bf16 would store only the input layer), --model dlrm has no such layers, and
// --dp-compress updates exchanges weight changes smaller than a bf16 step. A resumed run keeps its
// checkpoint's storage (f32 for checkpoints saved before the choice was recorded). Decided by the
// host's CPU whatever the device, so that the ranks of one cluster agree where their CPUs do (the
// rendezvous compares it and names the CPUs' difference). Measured: docs/training.md.
// `saved`: the resumed checkpoint's config (resumed_config), empty when the run starts afresh.
Dtype auto_precision(const RunArgs& a, bool cpu_has_bf16, const nlohmann::json& saved = nlohmann::json::object());
void resolve_precision(RunArgs& a);
// Why auto chose as it did where this CPU decided (the rendezvous compares it beside the
// precision, so that ranks whose CPUs differ are told so); none otherwise.
std::optional<std::string> precision_reason(const RunArgs& a);

// The optimizer the flags ask for (both models).
optim::Options optimizer_options(const RunArgs& a);

// Global steps of the whole run (what linear and cosine schedules decay over).
uint64_t total_steps(const RunArgs& a, size_t train_points);

// --grid DxM and --slice-weights W,W,...: read when the command line is parsed (a typo fails
// before the data is read); whether they fit the run is checked once its size is known.
void parse_grid_and_weights(RunArgs& a);

Grid process_grid(const RunArgs& a, int world);

void check_weights(const RunArgs& a, int model_ranks);

// The network the flags describe (what checkpoints record and predict/evaluate rebuild).
layers::NetworkSpec network_spec(const RunArgs& a, const data::Dataset& train);

// The settings a checkpoint must agree with to be resumed. A key a checkpoint lacks is not
// compared, so checkpoints from before a setting existed stay resumable.
nlohmann::json run_config(const RunArgs& a, const data::Dataset& train);

train::TrainerOptions trainer_options(const RunArgs& a, size_t train_points);

// The run config --resume's checkpoint was saved with (an empty object without --resume, or when
// its manifest is missing or damaged: the resume itself then says so, with the file and what is
// wrong). What the auto settings take from a resumed run.
nlohmann::json resumed_config(const RunArgs& a);

// --hidden auto, --output-init auto and an unset --lr, from the training set (apps/data_defaults.h).
// On --resume the checkpoint's values: its files were trained with them, and a checkpoint saved
// before these defaults existed resumes as it was trained.
void apply_data_defaults(RunArgs& a, const data::DatasetStats& stats);
// A streamed training set (--stream) is never held whole, and the ensemble's members (the label
// centroids of the input features, the nearest training points) are built from the points in memory:
// --infer ensemble given is refused naming --stream; chosen by the data's defaults, the run infers
// exact and says so.
void settle_streamed_inference(RunArgs& a);

// The weights alone, before they are allocated (--memory-limit, else the machine's available memory).
void check_weights_fit(const RunArgs& a, const data::Dataset& train, const Grid& grid);

// A flag's text as the run config records it: a number as a number, on / off as true / false, other
// text as text ("--batch 128" -> 128, "--dp-local-clip on" -> true, "--compress link" -> "link").
nlohmann::json setting_value(const std::string& text);

// What the command line checked after parsing, for every face: the settings that must be read
// before any data is (a typo fails at once), the notes on options that do not apply, and the
// optimizer auto resolves to.
void prepare(RunArgs& a);

}  // namespace frugal::run
