// TrainConfig: every option of a training run, with the defaults `frugal train` has (the command
// line fills one from its flags; Python from its keywords; a C++ program sets the fields it wants
// and leaves the rest). An option whose default depends on the data or the cluster is unset
// (std::nullopt, 0 or "auto" as each field says) and resolved by the run: --hidden, --lr,
// --optimizer, --output-init, --infer from the training set (train/run/data_defaults.h), --compress
// from the link between the replicas. The flag that sets each field is named next to it; the
// command-line reference (docs/cli.md) says what each does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/init.h"
#include "core/data/data_format.h"
#include "comm/exchange.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/tensor.h"
#include "layers/network_spec.h"
#include "train/divergence.h"
#include "train/forward_split.h"
#include "train/run/dlrm_run.h"
#include "train/run/dp_transport.h"
#include "train/run/infer_settings.h"

namespace frugal::run {

enum class ModelKind { xmc, dlrm };  // --model: the XMC network (or an MLP), or DLRM on click logs
enum class ParallelMode { model, data };  // --parallel: slice the model, or dense data parallelism
enum class TauEstimate { sampled, exact };  // --dp-tau: DpCompression::exact_tau
// --compress: DCT's keep fractions by hand (off), set online (auto), or auto where the replicas' link
// makes it pay (link, the default: decided at start-up, train/run/dct_cost.h CompressChoice).
enum class Compress { off, auto_, link };
enum class OutputInit { random, centroid };  // --output-init (unset: auto)
enum class DpSelect { global, row, floor };   // --dp-select (comm::DpCompression::per_row, row_floor)
enum class Bf16Dot { auto_, on, off };         // --bf16-dot (kernels/bf16_dot.h)
std::string_view to_string(ModelKind m);
std::string_view to_string(ParallelMode m);
std::string_view to_string(TauEstimate t);
std::string_view to_string(Compress c);
std::string_view to_string(OutputInit i);
std::string_view to_string(Bf16Dot d);

// --compress auto's settings (bench/REPORT.md, "Compression that adapts"): DCT-DP's keep per
// parameter falls from 1 while what is sent carries at least kAutoDpEnergy* of the accumulated
// gradient's energy, never below kAutoDpFloor; DCT-MP sends, per sample and slice, the fewest
// largest activations that carry kAutoMpMass of the slice's L1 mass.
// The target depends on the selection. Per-row selection (auto's for XMC gradients) spreads the
// entries over every touched row and holds within half a point at 0.7 on every set measured
// (long-tail XMC +0.57, another generator +0.37, GCIDE -0.40; 7-8x against a dense all-reduce,
// ~100x on GCIDE); one tau per parameter (--dp-select global, and auto's for optimizer updates)
// spends them on the rows that carry the energy and needs 0.9: 40-100x, but -0.65 points on the
// other generator's sets (bench/REPORT.md, "Compression that adapts").
inline constexpr float kAutoDpEnergyPerRow = 0.7f;
inline constexpr float kAutoDpEnergyGlobal = 0.9f;
inline constexpr float kAutoDpFloor = 0.002f;
inline constexpr double kAutoMpMass = 0.7;

// No optimizer of frugal's trains at a learning rate beyond this (lr 1e30 diverged in its first
// step): --lr is refused above it.
inline constexpr double kMaxLr = 1000;

struct TrainConfig {
  // The data: files (--train, --test: XMC text, an IDX prefix, Criteo logs), or with data given in
  // memory (run::train's overload) the names its messages use.
  std::string train, test;
  std::string valid;  // --valid FILE: a validation set of its own (instead of a share of the training set)
  data::DataFormat format = data::DataFormat::xmc;  // --format (idx trains the exact softmax)
  ModelKind model = ModelKind::xmc;                 // --model
  // Files the run writes: --metrics (JSON lines; FILE.rankR.jsonl on rank R > 0), --checkpoint DIR
  // after every epoch (the newest --keep-checkpoints kept), --resume DIR.
  std::string metrics, checkpoint, resume;
  // --checkpoint-every N: also save CHECKPOINT every N training steps within an epoch, so --resume
  // continues mid-epoch (unset: auto, train/run/epoch_parts.h; 0: at epoch ends only).
  std::optional<size_t> checkpoint_every;
  bool accept_unchecked_checkpoint = false;  // --accept-unchecked-checkpoint
  size_t keep_checkpoints = 2;               // --keep-checkpoints

  // The network: --hidden (0: auto, from the data), --layers W,W,... (replaces --hidden).
  size_t hidden = 0;
  std::string layers;
  layers::Sampler sampler = layers::Sampler::lsh;  // --sampler (IDX data: exact)
  // --precision (unset: auto, resolve_precision in train/run/run_settings.h)
  std::optional<Dtype> precision;
  layers::HashKind hash = layers::HashKind::dwta;  // --hash
  int k = 0, bin_size = 8;                         // --k (0: from the label count), --bin-size
  size_t active_target = 0;                        // --active-target
  size_t tables = lsh::kDefaultTables, bucket = 128, min_active = 0;  // --tables, --bucket-capacity, --min-active
  // --max-active (unset: auto, lsh::kDefaultActiveBudget labels a point; 0: no cap)
  std::optional<size_t> max_active;
  uint64_t rebuild_first = 50, rebuild_max = 2000;  // --rebuild-first, --rebuild-max
  double rebuild_growth = 1.5;                      // --rebuild-growth
  size_t negatives = 64;                            // --negatives
  double negatives_uniform = 0.5;                   // --negatives-uniform
  bool logq = true;                                 // --logq
  std::optional<OutputInit> output_init;            // --output-init (unset: auto)
  float centroid_scale = 10.0f;                     // --centroid-scale
  InferSettings infer;                              // --infer and the ensemble's flags
  DlrmArgs dlrm;                                    // --model dlrm's own (--ids, --embedding-dim, ...)

  // Training.
  size_t batch = 128, eval_batch = 512, max_steps = 0;  // --batch, --eval-batch, --max-steps
  // --epochs (unset: auto, train/run/validation_plan.h: up to 10 with early stopping, else 3).
  std::optional<size_t> epochs;
  uint64_t seed = 1;                                                 // --seed
  std::optional<float> lr;                     // --lr (unset: the optimizer's, or the data's)
  std::optional<optim::Method> optimizer;      // --optimizer (unset: auto)
  optim::SparseUpdates sparse_updates = optim::SparseUpdates::lazy;  // --sparse-updates
  std::optional<optim::ScheduleKind> lr_schedule;  // --lr-schedule (unset: auto, train/run/validation_plan.h)
  uint64_t warmup_steps = 0;                                         // --warmup-steps
  float momentum = 0.9f, weight_decay = 0.0f, clip_norm = 0.0f, dropout = 0.0f;
  float initial_accumulator = optim::Adagrad{}.initial_accumulator;  // --initial-accumulator
  uint32_t adam_freeze_v_after = 0;                                  // --adam-freeze-v-after
  bool rowwise_momentum = optim::RowwiseAdam{}.momentum;             // --rowwise-momentum
  std::optional<bool> rowwise_input;  // --rowwise-layers all (true) | output (false); unset: auto
  float update_threshold = 0.0f;      // --update-threshold
  // --valid-fraction (unset: auto, train/run/validation_plan.h) and --early-stopping N (unset: auto).
  std::optional<double> valid_fraction;
  std::optional<size_t> early_stopping;
  std::optional<size_t> valid_every;  // --valid-every N training steps within an epoch (unset: auto)
  train::OnDivergence on_divergence = train::OnDivergence::stop;  // --on-divergence

  // Where and how it runs: --device, --threads (0: the cores, shared by this host's ranks),
  // --memory-limit MiB (0: the machine's available memory), --quiet (no progress lines).
  std::string device = "auto";
  int threads = 0;
  double memory_limit_mib = 0;
  // --stream on|off: train from the packed training file block by block instead of holding it (unset:
  // auto, when it would take more than half the memory; the XMC network and --model dlrm).
  std::optional<bool> stream;
  bool quiet = false;
  // How this rank joins its run (comm::init's options: the cluster key, timeout, --rank, ...).
  comm::InitOptions join;
  // The ranks: --grid DxM or DxMxS, --pipeline S, --micro-batches, --stage-split, --parallel,
  // --slice-weights W,W,... or auto, --calibration-steps, --calibration-warmup, --dp-transport.
  std::string grid, slice_weights;
  int pipeline = 0;
  size_t micro_batches = 0;
  std::string stage_split = "auto";
  ParallelMode parallel = ParallelMode::model;
  size_t calibration_steps = 20, calibration_warmup = 5;
  DpTransport dp_transport = DpTransport::auto_;
  bool overlap = true;                                      // --overlap
  train::ForwardSplit overlap_forward = train::ForwardSplit::automatic;  // --overlap-forward

  // Compression (DCT): --compress, --compress-energy, and the expert's hand-set keeps.
  Compress compress = Compress::link;
  float compress_energy = 0.0f;
  std::optional<float> dp_keep;
  uint64_t dp_reestimate_every = 1;
  TauEstimate dp_tau = TauEstimate::sampled;
  std::optional<comm::DpTarget> dp_compress;  // unset: auto
  uint64_t dp_warmup_steps = 0;
  bool dp_momentum_correction = false, dp_local_clip = false;
  float dp_explore = 0.0f;
  std::vector<std::string> dp_keep_param;  // PREFIX=ETA
  std::optional<DpSelect> dp_select;       // unset: auto
  std::optional<float> dp_keep_input;
  std::optional<comm::ValueType> dp_wire;  // --dp-wire-dtype (unset: auto)
  std::optional<comm::ValueType> wire_dtype;  // --wire-dtype (unset: f32, and the auto wires)
  double mp_keep = 1.0, mp_mass = 1.0;
  comm::StraightThrough mp_straight_through = comm::StraightThrough::input;
  uint64_t mp_straight_through_steps = 0;
  std::optional<bool> mp_error_feedback;    // unset: off, on at a compressed pipeline boundary
  std::optional<uint64_t> mp_warmup_steps;  // unset: 0, two epochs at a compressed pipeline boundary
  std::optional<comm::ValueType> mp_wire;   // --mp-wire-dtype (unset: auto)

  // This rank's own: --strict (the data's and the checkpoint's warnings are errors for this run),
  // --bf16-dot (with --precision bf16 on the CPU: the AVX512-BF16 products where the CPU has them).
  bool strict = false;
  Bf16Dot bf16_dot = Bf16Dot::auto_;

  // The options set explicitly (by flag name; set_option records them, train/run/train_options.h),
  // so that one that does not apply to this run is said to be ignored. A C++ caller that sets a
  // field directly may name it here too.
  std::set<std::string> given;
};

}  // namespace frugal::run
