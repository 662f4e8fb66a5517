// `frugal train --model dlrm`: the DLRM click-through model (layers/dlrm/) on Criteo-format data
// (--format criteo). The options of its own (DlrmArgs; the flags: train/run/train_options.cpp) and the
// run itself (run_dlrm), which the run API (train/run/run.cpp) calls with the settings the models share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/init.h"
#include "comm/exchange.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "layers/dlrm/id_map.h"
#include "layers/dlrm/table_exchange.h"

namespace frugal::run {

struct DlrmArgs {
  layers::IdMode ids = layers::IdMode::full;
  size_t embedding_dim = 16;
  std::string bottom = "64", top = "64,32";  // hidden widths of the MLPs
  size_t min_id_count = 2;
  size_t hash_rows = size_t{1} << 16;
  double id_compression = 10;
  layers::Combine qr_combine = layers::Combine::sum;
  // ps: measured fastest where it matters, on slow links (bench/REPORT.md, "Recommendation models").
  layers::TableMode table_exchange = layers::TableMode::ps;
};
// The shared flags of `frugal train` that a DLRM run uses.
struct DlrmRun {
  std::string train, test, metrics;
  // The validation set (train/run/validation_plan.h, decided as for every trainer): --valid FILE, or
  // --valid-fraction (unset: auto, a click-stratified share of the training set) scored by AUC after
  // every epoch; --early-stopping (unset: auto) stops when it no longer improves; the best epoch is
  // kept in CHECKPOINT/best, which `frugal evaluate` / `predict` serve.
  std::string valid;
  std::optional<double> valid_fraction;
  std::optional<size_t> early_stopping;
  std::optional<size_t> valid_every;  // --valid-every: scored within long epochs too (unset: auto)
  std::string checkpoint, resume;  // --checkpoint DIR (saved after every epoch), --resume DIR
  std::optional<size_t> checkpoint_every;  // --checkpoint-every: saved within long epochs too (unset: auto)
  bool accept_unchecked_checkpoint = false;  // --accept-unchecked-checkpoint
  double memory_limit_mib = 0;               // --memory-limit (0: what the machine has)
  // --stream: the training set streamed from its packed file (unset: when it would take more than
  // half the memory; core/data/ctr_stream.h).
  std::optional<bool> stream;
  std::optional<size_t> epochs;  // --epochs (unset: auto, the bound validation_plan.h sets)
  size_t batch = 128, eval_batch = 4096, max_steps = 0;
  optim::Options optimizer = optim::Adam{};  // --optimizer, --lr, --momentum, --initial-accumulator, --weight-decay
  uint64_t seed = 1;
  int threads = 0;
  bool quiet = false;
  bool data_parallel = false;  // --parallel data: tables replicated and all-reduced in full
  std::string device = "auto";
  comm::InitOptions join;  // how this rank joins its run (every FRUGAL_* setting as a flag)
  std::optional<comm::DpCompression> dp;  // --dp-keep ...: DCT-DP on the MLP gradients
  // --lr-schedule (unset: auto) and --warmup-steps (the run sets the total steps from the data),
  // --clip-norm.
  std::optional<optim::ScheduleKind> lr_schedule;
  uint64_t warmup_steps = 0;
  float clip_norm = 0.0f;
  DlrmArgs dlrm;
  // The options every rank must agree on, as this rank has them (run::agreed_settings): compared at
  // rendezvous besides the run's own configuration.
  std::vector<std::pair<std::string, std::string>> agreed;
  // After every epoch, on every rank, with its metrics-log line (JSON text): false on any rank stops
  // every rank after that epoch's checkpoint.
  std::function<bool(const std::string& epoch_line)> on_epoch;
};
// Returns the epoch whose model the run leaves to be served: CHECKPOINT/best's when the best epoch
// on validation was kept there, else the last epoch trained.
uint64_t run_dlrm(const DlrmRun& a);

// `frugal evaluate --model DIR` / `frugal predict --model DIR` when DIR holds a DLRM checkpoint (one
// process; the tables are assembled from every rank's file; the folder's best epoch on validation
// when the run kept one, train/served_checkpoint.h): AUC, logloss, samples and clicks of
// `test` (one "name value" line each, or one JSON object), and one click probability per line of
// `input` (to `out`, or stdout).
// accept_unchecked: --accept-unchecked-checkpoint (a manifest without its own checksum loads).
void evaluate_dlrm(const std::string& model, const std::string& test, size_t batch, int threads, bool json,
                   bool accept_unchecked);
void predict_dlrm(const std::string& model, const std::string& input, const std::string& out, size_t batch,
                  int threads, bool accept_unchecked);

}  // namespace frugal::run
