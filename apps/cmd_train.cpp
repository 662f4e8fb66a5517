// `frugal train`: trains the network its flags describe (layers/network_spec.h: the XMC network,
// sparse input -> hidden ReLU -> softmax over the labels, or a multi-layer perceptron with
// --layers or IDX data) on XMC or IDX data (apps/train_inputs.h), on one rank or on a D x M process
// grid under `frugal launch` (model slicing, data parallelism, DCT compression), evaluating P@k,
// nDCG@k and PSP@k (k = 1, 3, 5) after every epoch, with a held-out validation split, early
// stopping, a JSON-lines metrics log and resumable checkpoints. Every flag is converted to its
// typed option once, while the command line is parsed (apps/cli_options.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <set>
#include <string>
#include <tuple>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "apps/train_in_process.h"
#include "comm/routed_communicator.h"
#include "apps/rank_threads.h"
#include "apps/step_profile_json.h"
#include "apps/comm_flags.h"
#include "apps/data_defaults.h"
#include "apps/memory_check.h"
#include "apps/infer_flags.h"
#include "apps/commands.h"
#include "apps/dct_cost.h"
#include "apps/dlrm_train.h"
#include "apps/pipeline_run.h"
#include "apps/dp_transport.h"
#include "apps/train_inputs.h"
#include "core/communicator.h"
#include "comm/codec.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "core/parse.h"
#include "core/quote.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "core/data/label_counts_file.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/fingerprint.h"
#include "train/early_stopping.h"
#include "train/metrics_log.h"
#include "core/propensity.h"
#include "core/rng.h"
#include "train/trainer.h"
#include "core/data/xmc_file.h"
#include "core/backend.h"
#include "core/device.h"
#include "kernels/bf16_dot.h"
#include "train/rebalance.h"
#include "train/resume_choice.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"

namespace frugal::cli {
namespace {

// Choices that exist only as flags of this command (the library's own are enums of their headers).
enum class ModelKind { xmc, dlrm };  // --model: the XMC network, or DLRM on click logs (apps/dlrm_train.h)
std::string_view to_string(ModelKind m) { return m == ModelKind::dlrm ? "dlrm" : "xmc"; }
enum class ParallelMode { model, data };  // --parallel: slice the model, or dense data parallelism
enum class TauEstimate { sampled, exact };  // --dp-tau: DpCompression::exact_tau
// --compress: DCT's keep fractions by hand (off), set online (auto), or auto where the replicas' link
// makes it pay (link, the default: decided at start-up, apps/dct_cost.h CompressChoice).
enum class Compress { off, auto_, link };
std::string_view to_string(Compress c) { return c == Compress::auto_ ? "auto" : c == Compress::link ? "link" : "off"; }
enum class OutputInit { random, centroid };  // --output-init (auto: TrainArgs::output_init_choice unset)
enum class DpSelect { global, row, floor };   // --dp-select (comm::DpCompression::per_row, row_floor)
std::string_view to_string(ParallelMode m) { return m == ParallelMode::data ? "data" : "model"; }
std::string_view to_string(TauEstimate t) { return t == TauEstimate::exact ? "exact" : "sampled"; }
std::string_view to_string(OutputInit i) { return i == OutputInit::centroid ? "centroid" : "random"; }

// The process grid: D data-parallel replicas x M ranks slicing the model (x S pipeline stages).
struct Grid {
  int data = 1, model = 1, stages = 1;
};

struct TrainArgs {
  std::string train, test, metrics, checkpoint, resume;
  // Every flag the ranks must agree on (all but kPerRankFlags and the cluster's), with its value as
  // given or defaulted, as the run config records it (flag_settings).
  nlohmann::json flag_settings = nlohmann::json::object();
  // Set when `frugal train` runs inside another program (apps/train_in_process.h): the data sets in
  // memory instead of the files --train and --test name, and a call after every epoch.
  InProcessTrain* in_process = nullptr;
  bool accept_unchecked_checkpoint = false;  // --accept-unchecked-checkpoint (with --resume)
  // How this rank joins its run: every FRUGAL_* setting as a flag (apps/comm_flags.h).
  CommFlags comm;
  // Checkpoints kept in --checkpoint DIR: the newest and the ones before it, for --resume's fallback.
  size_t keep_checkpoints = 2;
  size_t hidden = kDefaultHidden, batch = 128, epochs = 3, tables = 100, bucket = 128, min_active = 0, max_active = 0;
  size_t eval_batch = 512, max_steps = 0;
  int k = 0, bin_size = 8, threads = 0;
  size_t active_target = 0;  // --active-target (layers::NetworkSpec::active_target)
  std::optional<float> lr;  // unset: the optimizer's default (effective_lr)
  uint64_t seed = 1, rebuild_first = 50, rebuild_max = 2000;
  double rebuild_growth = 1.5;
  // Random negatives per point of the LSH softmax, their proposal's uniform share, logQ correction.
  size_t negatives = 64;
  double negatives_uniform = 0.5;
  bool logq = true;                           // --logq on|off
  InferFlags infer_flags;  // --infer and the ensemble's flags as given (apps/infer_flags.h)
  InferChoice infer;       // what they resolve to (apply_data_defaults): how the per-epoch evaluation scores labels
  OutputInit output_init = OutputInit::random;  // as resolved (run_train: apply_data_defaults)
  std::optional<OutputInit> output_init_choice;  // --output-init as given; unset: auto
  bool hidden_auto = true;                       // --hidden auto (the default)
  std::string data_defaults_line;                // what apply_data_defaults chose and why (rank 0 says it)
  float centroid_scale = 10.0f;
  layers::Sampler sampler = layers::Sampler::lsh;
  Dtype precision = Dtype::f32;  // --precision (layers::NetworkSpec::precision)
  layers::HashKind hash = layers::HashKind::dwta;
  // --grid and --slice-weights as given (run configs record the text) and as parsed.
  std::string grid, slice_weights;
  std::optional<Grid> grid_shape;
  std::vector<double> weights;
  // --pipeline S (0: no pipeline), --micro-batches N (0: default_micro_batches), --stage-split.
  int pipeline = 0;
  size_t micro_batches = 0;
  std::string stage_split = "auto";
  // --slice-weights auto: calibrate over --calibration-steps after --calibration-warmup steps.
  bool auto_weights = false;
  size_t calibration_steps = 20, calibration_warmup = 5;
  // --memory-limit MiB: the most this rank's model state may take when auto slicing (0: no limit
  // beyond the machine's free memory). Per rank, like --device: not part of the run config.
  double memory_limit_mib = 0;
  std::string device = "auto";  // --device cpu|cuda|cuda:N|auto (core/device.h)
  ModelKind model = ModelKind::xmc;
  cli::DpTransport dp_transport = cli::DpTransport::auto_;  // --dp-transport (apps/dp_transport.h)
  ParallelMode parallel = ParallelMode::model;
  bool quiet = false;
  data::DataFormat format = data::DataFormat::xmc;
  std::string layers;  // --layers (hidden widths; empty: one layer of --hidden)
  // DCT: --dp-keep (unset: every touched row travels), --dp-reestimate-every, --dp-tau, --mp-keep,
  // --wire-dtype
  std::optional<float> dp_keep;
  // --compress auto: DCT-DP's keep per parameter set online (ThresholdOptions::auto_energy, with
  // kAutoDpFloor as the floor) and DCT-MP's per sample (MpCompression::mass); see apply_compress.
  Compress compress = Compress::link;
  float compress_energy = 0.0f;  // --compress-energy (0: kAutoDpEnergyPerRow / kAutoDpEnergyGlobal)
  // Sampling 10k entries per parameter and step is cheap next to the step; a stale tau lets the
  // residuals outgrow it and send several times the asked fraction (bench/REPORT.md).
  uint64_t dp_reestimate_every = 1;
  TauEstimate dp_tau = TauEstimate::sampled;
  std::optional<comm::DpTarget> dp_compress;  // --dp-compress; unset (auto): resolve_dp_target decides
  uint64_t dp_warmup_steps = 0;
  bool dp_momentum_correction = false, dp_local_clip = false;  // DpCompression's (DGC's remedies)
  float dp_explore = 0.0f;  // --dp-explore: Slim-DP's exploration (DpCompression::explore)
  bool overlap = true;  // TrainerOptions::overlap
  OnDivergence on_divergence = OnDivergence::stop;  // --on-divergence (train/divergence.h)
  ForwardSplit overlap_forward = ForwardSplit::automatic;  // TrainerOptions::forward_split
  std::vector<std::string> dp_keep_param;  // --dp-keep-param PREFIX=ETA, repeatable
  // --dp-select; unset (auto): row when gradients are thresholded with values (the XMC and MLP
  // networks), else global. --dp-keep-input; unset (auto): 2.5 x --dp-keep under per-row selection.
  std::optional<DpSelect> dp_select;  // --dp-select (unset: auto)
  std::optional<float> dp_keep_input;
  // --dp-wire-dtype; unset (auto): --wire-dtype when given, else below --dp-keep 1 sign values for
  // exchanged updates and bf16 for gradients (what rounding loses is fed back), f32 at 1 (exact).
  std::optional<comm::ValueType> dp_wire;
  bool wire_dtype_given = false;  // --wire-dtype was on the command line
  // --mp-warmup-steps / --mp-error-feedback given: a compressed pipeline boundary keeps them as given
  // (else it warms up over the first two epochs with error feedback: run_pipeline_train).
  bool mp_warmup_given = false, mp_error_feedback_given = false;
  comm::ValueType wire_dtype = comm::ValueType::f32;
  double mp_keep = 1.0;
  double mp_mass = 1.0;  // --mp-mass: adaptive k (MpCompression::mass)
  comm::StraightThrough mp_straight_through = comm::StraightThrough::input;  // --mp-straight-through
  uint64_t mp_straight_through_steps = 0;  // --mp-straight-through-steps (0: the whole run)
  bool mp_error_feedback = false;          // --mp-error-feedback (MpCompression::error_feedback)
  uint64_t mp_warmup_steps = 0;
  // --mp-wire-dtype; unset (auto): --wire-dtype when given, else below --mp-keep 1 scaled int8
  // (bench/REPORT.md, "DCT-MP with one-byte values"), f32 at 1 (exact).
  std::optional<comm::ValueType> mp_wire;
  // Optimizer and regularization (docs/optimizers.md).
  // --optimizer as given (unset: auto) and what it resolved to (resolve_optimizer): every other use
  // reads `optimizer`.
  std::optional<optim::Method> optimizer_choice;
  optim::Method optimizer = optim::Method::adam;
  bool optimizer_from_checkpoint = false;  // auto took --resume's
  optim::SparseUpdates sparse_updates = optim::SparseUpdates::lazy;
  optim::ScheduleKind lr_schedule = optim::ScheduleKind::constant;
  float momentum = 0.9f, weight_decay = 0.0f, clip_norm = 0.0f, dropout = 0.0f;
  float initial_accumulator = optim::Adagrad{}.initial_accumulator;
  uint32_t adam_freeze_v_after = 0;  // optim::Options::freeze_second_moment
  bool rowwise_momentum = optim::RowwiseAdam{}.momentum;  // optim::Options::rowwise_momentum
  // --rowwise-layers all|output (optim::Options::rowwise_input); unset: all, or output under auto.
  std::optional<bool> rowwise_input;
  float update_threshold = 0.0f;                           // optim::Options::update_threshold
  kernels::Bf16Dot bf16_dot = kernels::Bf16Dot::auto_;     // --bf16-dot (kernels/bf16_dot.h)
  uint64_t warmup_steps = 0;
  double valid_fraction = 0.0;
  size_t early_stopping = 0;
};

float effective_lr(const TrainArgs& a) {
  if (a.lr) return *a.lr;
  switch (a.optimizer) {
    case optim::Method::sgd: return optim::Sgd{}.lr;
    case optim::Method::adagrad: return optim::Adagrad{}.lr;
    // The XMC network's rate; DLRM's dense MLP shares the rate and overfits at it (synth-ctr, 3
    // epochs: AUC 0.577 at 0.1, 0.596 at 0.03, 0.656 at 0.01), so DLRM keeps Adagrad's.
    case optim::Method::rowwise_adagrad:
      return a.model == ModelKind::dlrm ? optim::Adagrad{}.lr : optim::RowwiseAdagrad{}.lr;
    // DLRM's dense MLP shares the rate: it keeps Adam's.
    case optim::Method::rowwise_adam: return a.model == ModelKind::dlrm ? optim::Adam{}.lr : optim::RowwiseAdam{}.lr;
    case optim::Method::adam: break;
  }
  return optim::Adam{}.lr;
}

// --optimizer auto (the default): row-wise Adam where the output layer is a sampled (LSH) softmax,
// the huge row-sparse table whose few touched rows a step updates, as FBGEMM's embedding tables;
// Adam elsewhere (an exact softmax, Fashion-MNIST's IDX images, --model dlrm). Measured
// (docs/optimizers.md): row-wise Adam ends 3 epochs of the synthetic 100k-label sets 6 points of
// P@1 above Adam (3 seeds) and the long-tail sets 14 points above (3 sets); on Fashion-MNIST (exact
// softmax, every input row touched each step) it lost 1.1 points.
optim::Method auto_optimizer(const TrainArgs& a) {
  if (a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo) return optim::Method::adam;
  if (a.adam_freeze_v_after > 0) return optim::Method::adam;  // a flag of Adam's own: the user means Adam
  return a.sampler == layers::Sampler::lsh ? optim::Method::rowwise_adam : optim::Method::adam;
}

// auto with --resume: the checkpoint's optimizer (its state is what the files hold; a run saved
// before auto existed, or with another choice, resumes as it was trained).
void resolve_optimizer(TrainArgs& a) {
  a.optimizer = a.optimizer_choice.value_or(auto_optimizer(a));
  // auto's row-wise Adam keeps row-wise state on the output layer's label rows only.
  if (!a.optimizer_choice && !a.rowwise_input) a.rowwise_input = false;
  if (a.optimizer_choice || a.resume.empty() || a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo)
    return;
  try {
    const CheckpointManifest m = read_manifest(a.resume, a.accept_unchecked_checkpoint);
    if (m.optimizer.is_object()) a.optimizer = optim::method_from_string(m.optimizer.value("method", "adam"));
    else a.optimizer = optim::Method::adam;  // checkpoints from before the record hold lazy Adam state
    if (m.config.is_object() && m.config.contains("rowwise_layers"))
      a.rowwise_input = m.config.value("rowwise_layers", std::string("all")) == "all";
    a.optimizer_from_checkpoint = true;
  } catch (const std::exception&) {
    // A missing or damaged manifest: the resume itself says so, with the file and what is wrong.
  }
}

// The optimizer the flags ask for (both models).
optim::Options optimizer_options(const TrainArgs& a) {
  FRUGAL_CHECK(a.adam_freeze_v_after == 0 || a.optimizer == optim::Method::adam,
               fmt::format("--adam-freeze-v-after freezes plain Adam's per-element second moment: --optimizer {} "
                           "has {} (use --optimizer adam or drop the flag)", optim::to_string(a.optimizer),
                           a.optimizer == optim::Method::rowwise_adam ? "one per row" : "none"));
  FRUGAL_CHECK(a.adam_freeze_v_after == 0 || a.sparse_updates == optim::SparseUpdates::lazy,
               "--adam-freeze-v-after needs --sparse-updates lazy (a catch-up replays the second moment's decay)");
  return {.method = a.optimizer, .lr = effective_lr(a), .momentum = a.momentum,
          .initial_accumulator = a.initial_accumulator, .weight_decay = a.weight_decay, .updates = a.sparse_updates,
          .freeze_second_moment = a.adam_freeze_v_after, .rowwise_momentum = a.rowwise_momentum,
          .rowwise_input = a.rowwise_input.value_or(true),
          .update_threshold = a.update_threshold};
}

// Global steps of the whole run (what linear and cosine schedules decay over).
uint64_t total_steps(const TrainArgs& a, size_t train_points) {
  uint64_t per_epoch = (train_points + a.batch - 1) / a.batch;
  if (a.max_steps > 0) per_epoch = std::min<uint64_t>(per_epoch, a.max_steps);
  return per_epoch * a.epochs;
}

// --grid DxM and --slice-weights W,W,...: read when the command line is parsed (a typo fails
// before the data is read); whether they fit the run is checked once its size is known.
void parse_grid_and_weights(TrainArgs& a) {
  if (!a.grid.empty()) {
    // DxMxS: the pipeline's stages last (DxM with one stage).
    const size_t second = a.grid.find('x', a.grid.find('x') == std::string::npos ? 0 : a.grid.find('x') + 1);
    const std::string dm = second == std::string::npos ? a.grid : a.grid.substr(0, second);
    int stages = 1, d = 0, m = 0;
    try {  // the message quotes the grid as typed, not the part that failed
      if (second != std::string::npos)
        stages = parse_number<int>("--grid", a.grid.substr(second + 1), "", [](int n) { return n > 0; });
      std::tie(d, m) = parse_pair<int>("--grid", dm, 'x', "", [](int n) { return n > 0; });
    } catch (const Error&) {
      throw Error(fmt::format("--grid {}: expected DxM, e.g. 2x2, or DxMxS (S pipeline stages), e.g. 2x1x2, each a "
                              "whole number from 1 up", quote_input(a.grid)));
    }
    a.grid_shape = Grid{d, m, stages};
    FRUGAL_CHECK(stages == 1 || a.pipeline == 0 || a.pipeline == stages,
                 fmt::format("--grid {} has {} pipeline stages, --pipeline says {}", a.grid, stages, a.pipeline));
    if (stages > 1) a.pipeline = stages;
  }
  FRUGAL_CHECK(a.pipeline > 0 || (a.micro_batches == 0 && a.stage_split == "auto"),
               fmt::format("{} applies to a pipeline: give --pipeline S too",
                           a.micro_batches > 0 ? "--micro-batches" : "--stage-split"));
  a.auto_weights = a.slice_weights == "auto";
  if (!a.slice_weights.empty() && !a.auto_weights)
    a.weights = parse_list<double>("--slice-weights", a.slice_weights, "weight",
                                   "numbers >= 0 separated by commas, e.g. 1,1,2 (0: the rank holds no neurons)",
                                   [](double w) { return w >= 0 && std::isfinite(w); });
}

Grid process_grid(const TrainArgs& a, int world) {
  if (a.parallel == ParallelMode::data) {
    FRUGAL_CHECK(!a.grid_shape || (a.grid_shape->data == world && a.grid_shape->model == 1),
                 fmt::format("--parallel data runs the whole model on every rank (grid {}x1); --grid {} contradicts it",
                             world, a.grid));
    return {world, 1};
  }
  if (a.pipeline > 0) {
    const Grid g = a.grid_shape ? *a.grid_shape : Grid{world / a.pipeline, 1, a.pipeline};
    FRUGAL_CHECK(world % a.pipeline == 0 && g.data * g.model * g.stages == world,
                 fmt::format("--pipeline {} needs a multiple of {} ranks{}, but the run has {}", a.pipeline, a.pipeline,
                             a.grid_shape ? fmt::format(" ({} with --grid {})", g.data * g.model * g.stages, a.grid) : "",
                             world));
    return {g.data, g.model, a.pipeline};
  }
  if (!a.grid_shape) return {1, world};
  const Grid g = *a.grid_shape;
  FRUGAL_CHECK(g.data * g.model == world,
               fmt::format("--grid {} needs {} ranks, but the run has {}", a.grid, g.data * g.model, world));
  return g;
}

void check_weights(const TrainArgs& a, int model_ranks) {
  FRUGAL_CHECK(a.weights.empty() || static_cast<int>(a.weights.size()) == model_ranks,
               fmt::format("--slice-weights has {} weights but the model is sliced over {} ranks", a.weights.size(),
                           model_ranks));
  FRUGAL_CHECK(a.weights.empty() || std::any_of(a.weights.begin(), a.weights.end(), [](double w) { return w > 0; }),
               fmt::format("--slice-weights {}: at least one rank must hold neurons (a weight > 0)", a.slice_weights));
}

// The network the flags describe (what checkpoints record and predict/evaluate rebuild).
layers::NetworkSpec network_spec(const TrainArgs& a, const data::Dataset& train) {
  return {.features = train.num_features, .labels = train.num_labels, .hidden = a.hidden, .layers = a.layers,
          .format = std::string(data::to_string(a.format)), .sampler = std::string(layers::to_string(a.sampler)),
          .hash = std::string(layers::to_string(a.hash)), .k = a.k, .bin_size = a.bin_size,
          .active_target = a.active_target, .tables = a.tables, .bucket = a.bucket, .min_active = a.min_active, .max_active = a.max_active,
          .rebuild_first = a.rebuild_first, .rebuild_max = a.rebuild_max, .rebuild_growth = a.rebuild_growth,
          .negatives = a.negatives, .negatives_uniform = a.negatives_uniform, .logq = a.logq, .seed = a.seed,
          .precision = std::string(dtype_name(a.precision))};
}

// The settings a checkpoint must agree with to be resumed. A key a checkpoint lacks is not
// compared, so checkpoints from before a setting existed stay resumable.
nlohmann::json run_config(const TrainArgs& a, const data::Dataset& train) {
  nlohmann::json c = layers::network_config(network_spec(a, train));
  c["lr"] = effective_lr(a);
  if (a.output_init != OutputInit::random) {
    c["output_init"] = std::string(to_string(a.output_init));
    c["centroid_scale"] = a.centroid_scale;
  }
  c["optimizer"] = optim::to_string(a.optimizer);
  c["sparse_updates"] = optim::to_string(a.sparse_updates);
  if (a.optimizer == optim::Method::sgd) c["momentum"] = a.momentum;
  if (a.optimizer == optim::Method::adagrad || a.optimizer == optim::Method::rowwise_adagrad)
    c["initial_accumulator"] = a.initial_accumulator;
  if (a.adam_freeze_v_after > 0) c["adam_freeze_v_after"] = a.adam_freeze_v_after;
  if (a.optimizer == optim::Method::rowwise_adam) c["rowwise_momentum"] = a.rowwise_momentum;
  if (optim::Optimizer::row_wise_method(a.optimizer))
    c["rowwise_layers"] = a.rowwise_input.value_or(true) ? "all" : "output";
  if (a.update_threshold > 0) c["update_threshold"] = a.update_threshold;
  c["weight_decay"] = a.weight_decay;
  c["lr_schedule"] = optim::to_string(a.lr_schedule);
  c["warmup_steps"] = a.warmup_steps;
  // The steps a decaying schedule spans: resuming with other --epochs would change every rate.
  if (a.lr_schedule != optim::ScheduleKind::constant) c["schedule_steps"] = total_steps(a, train.size());
  c["clip_norm"] = a.clip_norm;
  c["dropout"] = a.dropout;
  c["valid_fraction"] = a.valid_fraction;  // changes the training set
  return c;
}

TrainerOptions trainer_options(const TrainArgs& a, size_t train_points) {
  TrainerOptions o;
  o.optimizer = optimizer_options(a);
  o.lr_schedule = {.kind = a.lr_schedule, .warmup_steps = a.warmup_steps,
                   .total_steps = total_steps(a, train_points)};
  o.clip_norm = a.clip_norm;
  o.dropout = {.p = a.dropout, .seed = Rng(a.seed).split(0xd40f).next_u64()};
  o.overlap = a.overlap;
  o.forward_split = a.overlap_forward;
  o.on_divergence = a.on_divergence;
  return o;
}

// Parameters of the whole model, counting every slice of a sliced layer once.
// This rank's model state in bytes: its parameters' values, the optimizer's state and what layers
// derive from them (LSH tables), each part and their sum per local parameter.
nlohmann::json model_state(const Model& model, const Trainer& trainer) {
  size_t weights = 0;
  for (const Parameter* p : model.parameters()) weights += p->value.bytes();
  size_t derived = 0;
  for (const auto& layer : model.layers()) derived += layer->derived_state_bytes();
  const size_t optimizer = trainer.optimizer().state_bytes(), total = weights + optimizer + derived;
  const size_t params = model.num_parameters();
  return {{"weights", weights}, {"optimizer", optimizer}, {"lsh_tables", derived}, {"total", total},
          {"per_parameter", params > 0 ? static_cast<double>(total) / static_cast<double>(params) : 0.0}};
}

// Each parameter's shape on this rank and in full, and the rows that had a gradient per step (before
// any data-parallel exchange): `frugal plan` models the replicas' touched-rows exchange from these.
nlohmann::json parameter_rows(const Model& model, const FitResult& fit) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<Parameter*> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const bool sliced = p.sliced_axis >= 0;
    const double touched = i < fit.touched_rows.size() && fit.steps > 0
                               ? static_cast<double>(fit.touched_rows[i]) / static_cast<double>(fit.steps) : 0.0;
    out.push_back({{"name", p.name}, {"rows", p.value.rows()}, {"cols", p.value.cols()},
                   {"full_rows", sliced ? p.full_rows : p.value.rows()}, {"full_cols", sliced ? p.full_cols : p.value.cols()},
                   {"sliced_axis", p.sliced_axis}, {"touched_rows_per_step", touched}});
  }
  return out;
}

size_t total_parameters(const Model& model) {
  size_t n = 0;
  for (const Parameter* p : model.parameters()) n += p->sliced_axis < 0 ? p->value.size() : p->full_rows * p->full_cols;
  return n;
}

// --dp-compress auto. Exchanging optimizer updates trains better where every parameter has a
// gradient in (nearly) every row each step: measured within 0.5 points at 124x on Fashion-MNIST's
// MLP, where thresholded gradients lose 1.9 points. Where rows are sparse (sparse input features,
// an LSH-sampled output layer) each replica's lazy optimizer gives a rarely seen row its large
// first steps, and averaging halves rows only one replica touched: thresholded gradients were 0.4
// to 1.5 points better there (synthetic XMC, GCIDE). The input rows' density is measured on the
// training set's first batches (every rank reads the same data, so every rank decides alike).
struct DpTargetChoice {
  comm::DpTarget target;
  double input_rows_touched;  // mean fraction of input rows a batch touches
};
DpTargetChoice resolve_dp_target(const TrainArgs& a, const data::Dataset& train, const Backend& backend) {
  const size_t batch = std::max<size_t>(1, a.batch), batches = std::min<size_t>(16, std::max<size_t>(1, train.size() / batch));
  std::vector<uint32_t> seen(train.num_features, 0);
  double touched = 0.0;
  for (size_t k = 0; k < batches; ++k) {
    size_t distinct = 0;
    for (size_t i = k * batch; i < std::min(train.size(), (k + 1) * batch); ++i)
      for (const uint32_t f : train.points.features_of(i))
        if (f < seen.size() && seen[f] != k + 1) {
          seen[f] = static_cast<uint32_t>(k + 1);
          ++distinct;
        }
    touched += train.num_features > 0 ? static_cast<double>(distinct) / train.num_features : 0.0;
  }
  touched /= static_cast<double>(batches);
  // At --dp-keep 1 nothing is thresholded: gradients give exactly the uncompressed sum.
  // bf16 storage cannot hold the replicas' small weight changes (check_precision): gradients then.
  // DGC's remedies (--dp-momentum-correction, --dp-local-clip) act on gradients: asked for, they decide.
  // Updates are thresholded on the host's weights: a rank whose model lives on a device (its memory is
  // not the host's, --device emulated) thresholds gradients.
  const bool host_weights = backend.device().is_host();
  // --update-threshold holds rows back in the optimizer, whose row lists updates mode replays: gradients.
  const bool dense_rows = touched >= 0.5 && a.sampler == layers::Sampler::exact && a.dp_keep && *a.dp_keep < 1.0f &&
                          a.update_threshold == 0.0f &&
                          a.precision == Dtype::f32 && !a.dp_momentum_correction && !a.dp_local_clip && host_weights;
  return {dense_rows ? comm::DpTarget::updates : comm::DpTarget::gradients, touched};
}

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
constexpr float kAutoDpEnergyPerRow = 0.7f;
constexpr float kAutoDpEnergyGlobal = 0.9f;
constexpr float kAutoDpFloor = 0.002f;
constexpr double kAutoMpMass = 0.7;

// --compress auto's DCT-DP energy target: --compress-energy, else the selection's default.
float auto_dp_energy(const TrainArgs& a, bool per_row) {
  if (a.compress_energy > 0.0f) return a.compress_energy;
  return per_row ? kAutoDpEnergyPerRow : kAutoDpEnergyGlobal;
}

// `target`: what DCT-DP thresholds, where the trainer supports only one (DLRM: gradients).
// The sparse input layer's parameters (SparseDense of the XMC and MLP networks).
constexpr const char* kInputLayerPrefix = "sparse_dense.";
// Under per-row selection the input layer keeps this many times --dp-keep by default: its rare rows
// carry the quality (bench/REPORT.md, "per-row selection": synthetic XMC and GCIDE).
constexpr double kInputKeepFactor = 2.5;

// --dp-keep-param's overrides (first), then the input layer's keep: --dp-keep-input, or under per-row
// selection kInputKeepFactor x --dp-keep.
std::vector<comm::KeepOverride> dp_keep_overrides(const TrainArgs& a, bool per_row) {
  std::vector<comm::KeepOverride> out;
  for (const std::string& text : a.dp_keep_param) {
    const size_t eq = text.find('=');
    const std::optional<float> keep = eq == std::string::npos ? std::nullopt : to_number<float>(text.substr(eq + 1));
    if (eq == 0 || !keep || !(*keep > 0.0f && *keep <= 1.0f))
      throw_bad_value("--dp-keep-param", text, "PREFIX=ETA, a parameter name prefix and a fraction in (0, 1], "
                                               "e.g. softmax.=0.2");
    out.push_back({text.substr(0, eq), *keep});
  }
  if (a.dp_keep_input)
    out.push_back({kInputLayerPrefix, *a.dp_keep_input});
  else if (per_row && a.model == ModelKind::xmc && *a.dp_keep < 1.0f)
    out.push_back({kInputLayerPrefix, static_cast<float>(std::min(1.0, kInputKeepFactor * static_cast<double>(*a.dp_keep)))});
  return out;
}

std::optional<comm::DpCompression> dp_compression(const TrainArgs& a, std::optional<comm::DpTarget> target = {}) {
  if (!a.dp_keep) return std::nullopt;
  const comm::DpTarget what = target.value_or(a.dp_compress.value_or(comm::DpTarget::gradients));
  // auto: per-row selection for thresholded gradients of the networks with a sparse input layer
  // (not DLRM, whose exchange is measured with one tau), never with sign values.
  const bool explicit_sign = (a.dp_wire && *a.dp_wire == comm::ValueType::sign) ||
                             (!a.dp_wire && a.wire_dtype_given && a.wire_dtype == comm::ValueType::sign);
  const bool per_row = a.dp_select ? *a.dp_select == DpSelect::row
                                   : what == comm::DpTarget::gradients && a.model == ModelKind::xmc && !explicit_sign &&
                                         *a.dp_keep < 1.0f;
  // auto: optimizer updates are of one magnitude (Adam normalizes them), so a sign and the
  // selection's mean magnitude carry them (1-bit Adam's observation); gradients span orders of
  // magnitude and keep bf16 values.
  // (The floor sends each touched row's largest entry as a value: no signs under auto either.)
  const bool floor = a.dp_select == DpSelect::floor;
  const comm::ValueType wire = a.dp_wire            ? *a.dp_wire
                               : a.wire_dtype_given ? a.wire_dtype
                               : *a.dp_keep >= 1.0f ? comm::ValueType::f32
                               : what == comm::DpTarget::updates && !per_row && !floor ? comm::ValueType::sign
                                                                                           : comm::ValueType::bf16;
  FRUGAL_CHECK(a.dp_explore == 0.0f || wire != comm::ValueType::sign,
               fmt::format("--dp-explore sends the explored entries with their values, but DCT-DP's values travel as "
                           "signs ({}): give --dp-wire-dtype bf16 (or f32, f16)",
                           a.dp_wire ? "--dp-wire-dtype sign"
                           : a.wire_dtype_given ? "--wire-dtype sign"
                                                : "the default for exchanged updates with --dp-select global"));
  FRUGAL_CHECK(!floor || wire != comm::ValueType::sign,
               fmt::format("--dp-select floor sends each touched row's largest entry with its value, but DCT-DP's "
                           "values travel as signs ({}): give --dp-wire-dtype bf16 (or f32, f16), or --dp-select global",
                           a.dp_wire ? "--dp-wire-dtype sign" : "--wire-dtype sign"));
  return comm::DpCompression{.keep = *a.dp_keep, .reestimate_every = a.dp_reestimate_every,
                             .exact_tau = a.dp_tau == TauEstimate::exact, .wire = wire, .seed = a.seed,
                             .target = what, .warmup_steps = a.dp_warmup_steps, .per_row = per_row,
                             .row_floor = a.dp_select == DpSelect::floor,
                             .momentum_correction = a.dp_momentum_correction, .local_clipping = a.dp_local_clip,
                             .per_parameter = dp_keep_overrides(a, per_row),
                             .auto_energy = a.compress == Compress::auto_ ? auto_dp_energy(a, per_row) : 0.0f,
                             .explore = a.dp_explore};
}

comm::MpCompression mp_compression(const TrainArgs& a) {
  const comm::ValueType wire = a.mp_wire            ? *a.mp_wire
                               : a.wire_dtype_given ? a.wire_dtype
                               : a.mp_keep != 1.0 || a.mp_mass < 1.0 ? comm::ValueType::i8
                                                                    : comm::ValueType::f32;
  return {.keep = a.mp_keep, .wire = wire, .warmup_steps = a.mp_warmup_steps, .mass = a.mp_mass,
          .straight_through = a.mp_straight_through, .straight_through_steps = a.mp_straight_through_steps,
          .error_feedback = a.mp_error_feedback};
}

comm::RunConfig to_run_config(const nlohmann::json& config) {
  comm::RunConfig out;
  for (const auto& [key, value] : config.items()) out[key] = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

// How many times `frugal launch --max-restarts` has restarted the job this rank belongs to
// (FRUGAL_RESTART_COUNT; unset: 0), recorded in every epoch line.
uint64_t restart_count() {
  const char* text = std::getenv(std::string(comm::env::kRestartCount).c_str());
  if (text == nullptr || *text == '\0') return 0;
  return parse_number<uint64_t>(comm::env::kRestartCount, text, "a restart count (0, 1, 2, ...)");
}

nlohmann::json skipped_json(const std::vector<SkippedCheckpoint>& skipped) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : skipped) out.push_back({{"manifest", s.manifest}, {"reason", s.reason}});
  return out;
}

// The run's compute backend: the device --device names (core/device.h), where the model is placed
// once built (Model::set_backend; the trainer places its optimizer with it).
Backend& choose_device(const std::string& device, int threads) {
  Backend& backend = resolve_device(device);
  backend.set_num_threads(threads_for_rank(threads));
  return backend;
}

// The folder the ranks reslice through (train/rebalance.h): rank 0 names it, every rank gets
// the name. Under --checkpoint DIR (which every rank sees), a subfolder of it; else the temporary
// folder (the ranks must share it: one host).
std::string reslice_folder(comm::Communicator& world, const std::string& checkpoint) {
  std::string name;
  if (world.rank() == 0) {
    const auto base = checkpoint.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(checkpoint);
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    name = (base / fmt::format("reslice-{}-{}", static_cast<long>(::getpid()), ticks)).string();
  }
  const auto* chars = reinterpret_cast<const std::byte*>(name.data());
  std::vector<std::byte> bytes(chars, chars + name.size());  // empty on the ranks that receive
  world.broadcast_bytes(bytes, 0).wait();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The groups a run trains in, which --slice-weights auto may shrink: ranks it leaves out leave the
// model group (and the run's group: the world without them) and train no more.
struct RunGroups {
  comm::Communicator* world = nullptr;           // the ranks still training (all, until some leave)
  std::unique_ptr<comm::Communicator>& model;    // this rank's model group
  std::vector<std::unique_ptr<comm::Communicator>> retired{};  // groups replaced (kept alive)
  bool left = false;                             // this rank was left out
};

// The first epoch of a --slice-weights auto run: --calibration-warmup steps, --calibration-steps
// timed steps, the new weights from the group's step times, the model resliced onto them, then the
// rest of the epoch. Every rank computes the same weights from the same gathered times. Ranks the
// weighting leaves out leave the groups (groups.left): their messages no longer hold the others up.
FitResult calibrated_epoch(const TrainArgs& a, const data::Dataset& train, const FitOptions& fit_options,
                           RunGroups& groups, const Grid& grid, Model& model, std::optional<Trainer>& trainer,
                           const std::function<void(Model&, const std::vector<double>&)>& build, MetricsLog& log) {
  comm::Communicator& world = *groups.world;
  const Parallelism parallel = trainer->parallel();
  // A part of the epoch: `steps` steps (0: to the end) after `skip`, within --max-steps.
  const auto part = [&](size_t skip, size_t steps, bool end, const char* label) {
    FitOptions o = fit_options;
    o.skip_steps = skip;
    o.end_epoch = end;
    o.label = label;
    o.max_steps = steps;
    if (a.max_steps > 0) {
      const size_t left = a.max_steps > skip ? a.max_steps - skip : 0;
      o.max_steps = steps == 0 ? left : std::min(steps, left);
      if (left == 0) o.skip_steps = std::numeric_limits<size_t>::max();  // nothing left: skip every batch
    }
    return trainer->fit_epoch(train, o);
  };
  FitResult fit = a.calibration_warmup > 0 ? part(0, a.calibration_warmup, false, "warm-up") : FitResult{};
  const FitResult timed = part(fit.steps, a.calibration_steps, false, "calibrate");
  fit.merge(timed);
  const double mine = timed.steps > 0 ? timed.step_seconds() : fit.step_seconds();
  if (fit.steps == 0 || mine <= 0) {
    if (world.rank() == 0)
      fmt::print("--slice-weights auto: the epoch has no steps to calibrate on; the slices stay as they are\n");
  } else {
    const std::vector<double> times = gather_step_seconds(mine, parallel.model, parallel.data);
    const std::vector<double> current = model.input().placement().weights;
    // Each rank's share is capped by what its memory holds (Backend::state_memory_available()).
    // (No weights: equal slices.)
    const size_t me = comm::is_active(parallel.model) ? static_cast<size_t>(parallel.model->rank()) : 0;
    const double my_share = current.empty() ? 1.0 / static_cast<double>(times.size())
                                            : current[me] / std::accumulate(current.begin(), current.end(), 0.0);
    const double state_bytes = model_state_bytes(model, *trainer);
    std::optional<double> room;
    if (const std::optional<uint64_t> available = model.input().backend().state_memory_available())
      room = static_cast<double>(*available);
    if (a.memory_limit_mib > 0) {
      const double limit_room = std::max(0.0, a.memory_limit_mib * 1048576.0 - state_bytes);
      room = room ? std::min(*room, limit_room) : limit_room;
    }
    const std::vector<double> caps =
        gather_memory_caps(memory_cap(my_share, state_bytes, room), parallel.model, parallel.data);
    // What the exchanges cost a step with every rank in: what a kept rank adds besides compute.
    const FitResult& timed_part = timed.steps > 0 ? timed : fit;
    const double my_wait = (timed_part.seconds - timed_part.compute_seconds) / static_cast<double>(timed_part.steps);
    const double exchange = gather_exchange_seconds(my_wait, parallel.model, parallel.data);
    const RebalancePlan plan = throughput_weights(times, current, {.exchange_seconds = exchange, .max_share = caps});
    std::vector<size_t> labels(static_cast<size_t>(grid.model));
    const auto bounds = slice_bounds(model.output().out_features(), static_cast<size_t>(grid.model), plan.weights);
    for (size_t r = 0; r < labels.size(); ++r) labels[r] = bounds[r + 1] - bounds[r];
    if (world.rank() == 0) {
      fmt::print("--slice-weights auto: calibrated over {} steps (after {} warm-up); shares capped by each rank's "
                 "free memory\n", timed.steps > 0 ? timed.steps : fit.steps,
                 timed.steps > 0 ? fit.steps - timed.steps : 0);
      const double total_throughput = std::accumulate(plan.throughput.begin(), plan.throughput.end(), 0.0);
      for (size_t r = 0; r < times.size(); ++r) {
        const double throughput_share = 100.0 * plan.throughput[r] / total_throughput;
        std::string why;
        if (plan.left_out[r])
          why = current.empty() || current[r] > 0
                    ? fmt::format(" -- left out: its throughput is {:.1f}% of the group's, too little to pay for "
                                  "its exchanges or its minimum share", throughput_share)
                    : std::string(" -- left out (it held nothing)");
        else if (plan.raised[r])
          why = fmt::format(" raised to the minimum share: its throughput is {:.1f}% of the group's", throughput_share);
        else if (plan.capped[r])
          why = ", capped by its memory";
        fmt::print("  model rank {}: {:.5f} s/step, new share {:.4f} ({} labels), memory holds {}{}\n", r, times[r],
                   plan.weights[r], labels[r], caps[r] >= 1.0 ? std::string("all") : fmt::format("{:.4f}", caps[r]),
                   why);
      }
      fmt::print("  exchanges with every rank in: {:.5f} s/step; predicted step at the new shares: {:.5f} s (the "
                 "slowest member's compute, and the exchanges of the ranks kept)\n",
                 exchange, plan.predicted_step_seconds);
      if (std::find(plan.left_out.begin(), plan.left_out.end(), true) != plan.left_out.end())
        fmt::print("  the ranks left out leave the model group and train no more: the others no longer wait "
                   "for their messages\n");
    }
    log.write({{"event", "calibration"}, {"steps", timed.steps > 0 ? timed.steps : fit.steps},
               {"rank_step_seconds", times}, {"slice_weights", plan.weights}, {"slice_labels", labels},
               {"raised_to_minimum", plan.raised}, {"left_out", plan.left_out},
               {"predicted_step_seconds", plan.predicted_step_seconds}, {"exchange_seconds", exchange},
               {"memory_cap", std::find(plan.capped.begin(), plan.capped.end(), true) != plan.capped.end()},
               {"memory_caps", caps}, {"capped_by_memory", plan.capped},
               {"rank", world.rank()}});
    const std::string folder = reslice_folder(world, a.checkpoint);
    std::unique_ptr<comm::Communicator> new_world;
    if (std::find(plan.left_out.begin(), plan.left_out.end(), true) == plan.left_out.end()) {
      reslice(folder, model, trainer, build, plan.weights);
    } else {
      // The ranks kept form the new model group (in their old order) and slice it by their weights;
      // every replica leaves out the same model ranks, so the data groups of those kept stay whole.
      groups.left = plan.left_out[me];
      std::vector<double> kept;
      for (size_t r = 0; r < plan.weights.size(); ++r)
        if (!plan.left_out[r]) kept.push_back(plan.weights[r]);
      auto new_model = groups.model->split(groups.left ? 1 : 0, groups.model->rank());
      new_world = world.split(groups.left ? 1 : 0, world.rank());
      groups.retired.push_back(std::move(groups.model));
      groups.model = std::move(new_model);
      const Regroup regroup{.leave = groups.left, .model = groups.model.get()};
      reslice(folder, model, trainer, build, kept, &regroup);
    }
    world.barrier().wait();  // every rank has read the folder
    if (world.rank() == 0) std::filesystem::remove_all(folder);
    if (new_world) {
      groups.world = new_world.get();
      groups.retired.push_back(std::move(new_world));
      if (groups.left) return fit;
    }
  }
  fit.merge(part(fit.steps, 0, true, "train"));
  return fit;
}

// --precision bf16: the combinations that cannot use it (both backends have bf16 storage kernels).
void check_precision(const TrainArgs& a) {
  if (a.precision == Dtype::f32) return;
  FRUGAL_CHECK(a.dp_compress != comm::DpTarget::updates,
               "--precision bf16 with --dp-compress updates is not supported (the replicas exchange weight changes "
               "smaller than a bf16 step): use --dp-compress gradients or --precision f32");
}

// DGC's remedies need what they act on.
void check_dgc(const TrainArgs& a, const Backend& backend) {
  for (const auto& [on, flag] : {std::pair{a.dp_momentum_correction, "--dp-momentum-correction"},
                                 std::pair{a.dp_local_clip, "--dp-local-clip"}}) {
    FRUGAL_CHECK(!on || a.dp_keep, fmt::format("{} on acts on DCT-DP's thresholded gradients: it needs --dp-keep "
                                               "ETA (and data-parallel replicas, --grid DxM with D > 1)", flag));
    FRUGAL_CHECK(!on || a.dp_compress != comm::DpTarget::updates,
                 fmt::format("{} on acts on gradients; --dp-compress updates exchanges optimizer updates (use "
                             "--dp-compress gradients)", flag));
  }
  FRUGAL_CHECK(!a.dp_local_clip || a.clip_norm > 0.0f,
               "--dp-local-clip on clips each replica's gradient to --clip-norm C / sqrt(replicas): give --clip-norm C");
  FRUGAL_CHECK(a.update_threshold == 0.0f || a.dp_compress != comm::DpTarget::updates,
               "--update-threshold holds rows back in the optimizer; --dp-compress updates exchanges the rows each step "
               "moved: use --dp-compress gradients, or drop --update-threshold");
  FRUGAL_CHECK(a.update_threshold == 0.0f || backend.device().is_host(),
               fmt::format("--update-threshold decides on the host; --device {} keeps the gradients in the device's "
                           "memory: drop the flag on this device", a.device));
  // Updates are the weights' changes, taken on the host: a model in a device's memory cannot.
  FRUGAL_CHECK(a.dp_compress != comm::DpTarget::updates || backend.device().is_host(),
               fmt::format("--dp-compress updates thresholds the weights' changes on the host; --device {} keeps the "
                           "model in the device's memory: use --dp-compress gradients",
                           a.device));
}

// --dp-momentum-correction where nothing is held back: every velocity is sent every step and
// restarts at 0, so the optimizer simply runs without momentum (rank 0 says it).
void note_momentum_correction(const TrainArgs& a, int replicas) {
  if (a.quiet || !a.dp_momentum_correction || !a.dp_keep) return;
  if (replicas < 2)
    fmt::print("note: --dp-momentum-correction has no effect without data-parallel replicas (--grid DxM, D > 1)\n");
  else if (*a.dp_keep >= 1.0f)
    fmt::print("note: --dp-momentum-correction at --dp-keep 1 sends every velocity every step, so it restarts at 0 "
               "each time: the optimizer runs without momentum (Adam with beta1 0)\n");
}

// What --precision bf16 leaves in f32 (rank 0 says it). bf16_products: the backend multiplies
// dense operands in bf16 (the CUDA backend's tensor cores; the CPU's bf16 matmul where --bf16-dot is
// active).
void note_precision(const TrainArgs& a, bool bf16_products) {
  if (a.precision != Dtype::f32 && !a.quiet && a.sampler == layers::Sampler::exact)
    fmt::print("note: --precision bf16 stores the sparse input layer's weights in bf16; the exact softmax "
               "multiplies its whole weight matrix every step and keeps it in f32{}\n",
               bf16_products ? " (its products, and the dense layers', run in bf16 with f32 sums on this device)"
                             : " (as the dense layers' products on this device)");
}

// DCT-MP's straight-through estimate at every boundary of a network with stacked hidden layers:
// its bias compounds through them (bench/REPORT.md, "DCT-MP with one-byte values").
void note_straight_through(const TrainArgs& a, int model_ranks) {
  const bool compressed = a.mp_keep != 1.0 || a.mp_mass < 1.0;
  const bool stacked = a.layers.find(',') != std::string::npos;
  if (!a.quiet && compressed && model_ranks > 1 && stacked && a.mp_straight_through == comm::StraightThrough::all)
    fmt::print("note: --mp-straight-through all adds the estimate at every sliced boundary; through stacked "
               "hidden layers its bias compounds (Fashion-MNIST 784-1024-1024-10 on 4 ranks at --mp-keep 0.1: "
               "-0.76 points, against -0.48 with input and -0.09 off)\n");
}

// A model trained on the CUDA backend alone (one model rank; in a mixed group the calibrated
// shares weigh the GPU by its measured speed): what is known of its speed (rank 0 says it).
void note_cuda_alone(const TrainArgs& a, const Backend& backend, int model_ranks) {
  if (a.quiet || model_ranks != 1 || backend.name() != "cuda") return;
  fmt::print("note: the CUDA backend keeps the step's tensors on the device{}; this design has not been timed on a "
             "GPU yet (the previous one, which copied every op's arguments through host memory, trained {} on an "
             "H200): compare --device cpu on this machine (bench/REPORT.md, \"GPU\")\n",
             a.sampler == layers::Sampler::exact ? "" : ", the LSH sampler's sets and tables included",
             a.sampler == layers::Sampler::exact ? "20-46x slower than PyTorch with --sampler exact"
                                                 : "the LSH sampler slower than --device cpu on the machine's 16 cores");
}

// --overlap-forward on where no split can happen says so.
void note_forward_split(const TrainArgs& a, int model_ranks) {
  if (a.quiet || a.overlap_forward != ForwardSplit::always) return;
  const bool compressed = a.mp_keep != 1.0 || a.mp_mass < 1.0 || mp_compression(a).wire != comm::ValueType::f32;
  const char* why = !a.overlap         ? "--overlap is off"
                    : model_ranks <= 1 ? "the input layer is not sliced (one model rank)"
                    : compressed       ? "DCT-MP's compressed exchange (--mp-keep, --mp-mass, or a narrow --mp-wire-dtype "
                                         "or --wire-dtype) goes whole"
                                       : nullptr;
  if (why != nullptr) fmt::print("note: --overlap-forward on has no effect: {}\n", why);
}

// --compress auto: DCT's keep fractions set online. The hand-set keep flags are the expert's way to
// the same settings: with auto they would fight it, so the run refuses them.
void apply_compress(TrainArgs& a) {
  FRUGAL_CHECK(a.compress != Compress::off || a.compress_energy == 0.0f,
               "--compress-energy sets --compress auto's target: give --compress auto too");
  if (a.compress != Compress::auto_) return;
  FRUGAL_CHECK(!a.dp_keep && a.mp_keep == 1.0 && a.mp_mass == 1.0 && a.dp_keep_param.empty() && !a.dp_keep_input,
               "--compress auto sets DCT's keep fractions itself: drop --dp-keep, --dp-keep-param, --dp-keep-input, "
               "--mp-keep and --mp-mass (or keep them and use --compress off)");
  a.dp_keep = kAutoDpFloor;
  a.mp_mass = kAutoMpMass;
}

// --compress link (the default) stands aside for the hand-set keeps, the recommendation model (its
// DCT-DP takes --dp-keep) and --parallel data (the dense all-reduce baseline): what those runs did
// before --compress existed. (Decided where link resolves, after the ranks compared their flags,
// so that a rank with another keep flag is named by that flag.)
bool link_stands_aside(const TrainArgs& a) {
  return a.dp_keep || a.mp_keep != 1.0 || a.mp_mass != 1.0 || !a.dp_keep_param.empty() || a.dp_keep_input ||
         a.model == ModelKind::dlrm || a.parallel == ParallelMode::data;
}

// This replica's automatic keeps over its parameters (ReplicaReducer::auto_keep).
struct AutoKeepSummary {
  float keep_min = 1.0f, keep_max = 0.0f;
  double energy_min = 1.0, energy_max = 0.0;
  uint64_t backoffs = 0;
};
AutoKeepSummary auto_keep_summary(const Trainer& trainer) {
  AutoKeepSummary out;
  const comm::ReplicaReducer* reducer = trainer.reducer();
  const size_t n = reducer != nullptr ? reducer->feedback_states() : 0;
  for (size_t i = 0; i < n; ++i) {
    const comm::ReplicaReducer::AutoKeep k = reducer->auto_keep(i);
    out.keep_min = std::min(out.keep_min, k.keep);
    out.keep_max = std::max(out.keep_max, k.keep);
    out.energy_min = std::min(out.energy_min, k.carried_energy);
    out.energy_max = std::max(out.energy_max, k.carried_energy);
    out.backoffs += k.backoffs;
  }
  if (n == 0) out = {.keep_min = 1.0f, .keep_max = 1.0f, .energy_min = 1.0, .energy_max = 1.0, .backoffs = 0};
  return out;
}

// What --compress auto does on this grid (rank 0 says it once).
void note_compress(const TrainArgs& a, const Grid& grid) {
  if (a.quiet || a.compress != Compress::auto_) return;
  std::string what;
  if (grid.data > 1)
    what += fmt::format("DCT-DP keeps, per parameter, the fewest entries whose values carry {:.0f}% of the "
                        "accumulated gradient's energy (from everything down to at most 1 in {:.0f})",
                        100.0 * dp_compression(a)->auto_energy, 1.0 / kAutoDpFloor);
  if (grid.model > 1)
    what += fmt::format("{}DCT-MP sends, per sample and slice, the fewest largest activations that carry {:.0f}% "
                        "of the slice's L1 mass", what.empty() ? "" : "; ", 100.0 * kAutoMpMass);
  fmt::print("compress auto: {}\n", what.empty() ? "one rank, nothing crosses the network" : what);
}

// --hidden auto, --output-init auto and an unset --lr, from the training set (apps/data_defaults.h).
// On --resume the checkpoint's values: its files were trained with them, and a checkpoint saved
// before these defaults existed resumes as it was trained.
void apply_data_defaults(TrainArgs& a, const data::Dataset& train) {
  const bool xmc = a.format == data::DataFormat::xmc;
  const DataDefaultsRequest request{
      .hidden_auto = a.hidden_auto && a.layers.empty(),
      .centroid_start = a.output_init_choice ? std::optional<bool>(*a.output_init_choice == OutputInit::centroid)
                                             : std::nullopt,
      .lr_auto = !a.lr,
      .infer_auto = !a.infer_flags.mode,
      .network = xmc,
      .rows_per_point = a.sampler == layers::Sampler::exact ? static_cast<double>(train.num_labels)
                                                              : std::min(1000.0, static_cast<double>(train.num_labels))};
  const DataDefaults d = choose_data_defaults(data::compute_stats(train), request);
  nlohmann::json saved;
  if (!a.resume.empty()) {
    try {
      saved = read_manifest(a.resume, a.accept_unchecked_checkpoint).config;
    } catch (const std::exception&) {
      // A missing or damaged manifest: the resume itself says so, with the file and what is wrong.
    }
  }
  if (!saved.is_object()) saved = nlohmann::json::object();
  const bool resumed = saved.contains("labels");  // a saved run's config (every XMC config names its labels)
  if (request.hidden_auto) a.hidden = saved.contains("hidden") ? saved["hidden"].get<size_t>() : d.hidden;
  a.output_init = d.centroid_start ? OutputInit::centroid : OutputInit::random;
  if (!a.output_init_choice && resumed)  // the saved run's own start (none runs on resume)
    a.output_init = saved.value("output_init", std::string("random")) == "centroid" ? OutputInit::centroid
                                                                                   : OutputInit::random;
  if (request.lr_auto) {
    if (saved.contains("lr")) a.lr = saved["lr"].get<float>();
    else if (d.lr) a.lr = d.lr;
  }
  // Inference is not training: a resumed run infers as the data says unless the checkpoint chose.
  const InferMode auto_infer = resumed && saved.contains("infer") ? saved_infer_mode(saved)
                               : d.ensemble                        ? InferMode::ensemble
                                                                   : InferMode::exact;
  a.infer = resolve_infer(a.infer_flags, auto_infer, saved);
  a.data_defaults_line = resumed && !d.summary.empty()
                             ? fmt::format("{} (resumed: the checkpoint's hidden {}, lr {:g})", d.summary, a.hidden,
                                           effective_lr(a))
                             : d.summary;
}

// The flags of `frugal train` each rank may set for itself, and why. Every other flag (but the
// cluster's, --rank and friends, which say how a rank joins) must be the same on every rank: the
// rendezvous compares each one, as given or defaulted (flag_settings), and names the one that differs.
// A new flag is compared unless it is added here.
constexpr std::pair<std::string_view, std::string_view> kPerRankFlags[] = {
    {"--train", "each rank reads its own copy of the data; the copies' fingerprints are compared"},
    {"--test", "each rank reads its own copy of the data; the copies' fingerprints are compared"},
    {"--metrics", "each rank writes its own log (FILE.rankR.jsonl)"},
    {"--resume", "hosts may mount the checkpoint folder at other paths; the checkpoint is checked on load"},
    {"--device", "a mixed cluster gives its ranks different devices"},
    {"--threads", "hosts have different core counts"},
    {"--memory-limit", "hosts have different memory"},
    {"--bf16-dot", "CPUs differ in the instruction; both ways compute the same products to bf16 rounding"},
    {"--quiet", "output only"},
    {"--strict", "how this rank treats warnings about its own input"},
    {"--accept-unchecked-checkpoint", "how this rank treats its own copy of the checkpoint"},
};

// Flags compared as resolved, by what run_config records (only where they leave the default: an
// "output_init" key means centroid rows), not as given ("auto" or "random" would read as a choice).
constexpr std::string_view kResolvedByRunConfig[] = {"--output-init", "--centroid-scale"};

bool outside_flag_settings(std::string_view flag) {
  return std::any_of(std::begin(kPerRankFlags), std::end(kPerRankFlags),
                     [&](const auto& f) { return f.first == flag; }) ||
         std::find(std::begin(kResolvedByRunConfig), std::end(kResolvedByRunConfig), flag) !=
             std::end(kResolvedByRunConfig);
}

// A flag's text as the run config records it: a number as a number, on / off as true / false, other
// text as text ("--batch 128" -> 128, "--dp-local-clip on" -> true, "--compress link" -> "link").
nlohmann::json setting_value(const std::string& text) {
  if (text == "on" || text == "off") return text == "on";
  if (const auto i = to_number<int64_t>(text)) return *i;
  if (const auto d = to_number<double>(text); d && std::isfinite(*d)) return *d;
  return text;
}

// The flags of `cmd` the ranks must agree on (all but kPerRankFlags, kResolvedByRunConfig and the
// cluster's), keyed as the run config names settings (--dp-keep -> dp_keep), each as given or
// defaulted; a flag without a value or default (an unset optional) is left out: a rank that sets it
// then differs by having it.
nlohmann::json flag_settings(const CLI::App& cmd, const CommFlags& comm) {
  nlohmann::json out = nlohmann::json::object();
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->get_lnames().empty()) continue;
    const std::string flag = "--" + o->get_lnames().front();
    if (flag == "--help" || outside_flag_settings(flag) || comm.has_flag(flag)) continue;
    std::string text;
    if (o->count() > 0) {
      const std::vector<std::string> given = o->results();
      text = o->get_items_expected_max() == 0 ? "on" : fmt::format("{}", fmt::join(given, ","));
    } else {
      text = o->get_items_expected_max() == 0 ? "off" : o->get_default_str();
    }
    if (text.empty()) continue;
    std::string key = o->get_lnames().front();
    std::replace(key.begin(), key.end(), '-', '_');
    out[key] = setting_value(text);
  }
  return out;
}

// PSP@k needs the training label counts: none (null, "n/a") for an empty training set, and none
// without test points.
nlohmann::json psp_value(const EvalResult& ev, bool has_test, size_t k) {
  if (!has_test) return nlohmann::json(nullptr);
  const auto it = ev.psp.find(k);
  return it == ev.psp.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second);
}

// What an epoch scored, for its record.
struct EpochScores {
  const EvalResult& ev;
  bool has_test = true;                 // false: no test points, the test metrics are null
  std::optional<double> valid_p1;       // --valid-fraction's P@1
  float step_max = 0.0f, step_min = 0.0f;  // compute seconds per step over the model ranks
};

// The epoch's record in the metrics log (event "epoch"): training, test metrics, traffic, memory,
// the step's profile, and what --compress auto and --update-threshold did.
nlohmann::json epoch_record(const TrainArgs& a, uint64_t epoch, const FitResult& fit, const EpochScores& scores,
                            const Trainer& trainer, const Model& model, int rank, uint64_t restarts) {
  const double per = fit.group_samples > 0 ? 1.0 / static_cast<double>(fit.group_samples) : 0.0;
  const auto ratio = [](uint64_t a, uint64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  const auto psp = [&](size_t k) { return psp_value(scores.ev, scores.has_test, k); };
  const auto test_metric = [&](double v) { return scores.has_test ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const EvalResult& ev = scores.ev;
  nlohmann::json line = {{"event", "epoch"},
             {"epoch", epoch},
             {"loss", fit.loss},
             {"train_samples_per_s", fit.samples_per_s},
             {"train_seconds", fit.seconds},
             {"p@1", test_metric(ev.p(1))},
             {"p@3", test_metric(ev.p(3))},
             {"p@5", test_metric(ev.p(5))},
             {"ndcg@1", test_metric(ev.ndcg.at(1))},
             {"ndcg@3", test_metric(ev.ndcg.at(3))},
             {"ndcg@5", test_metric(ev.ndcg.at(5))},
             {"psp@1", psp(1)},
             {"psp@3", psp(3)},
             {"psp@5", psp(5)},
             {"eval_seconds", ev.seconds},
             {"eval_labels_scored_per_sample", ev.labels_scored_per_sample},
             {"active_per_sample", fit.labels_scored_per_sample},
             {"steps", trainer.step()},
             {"rank_step_seconds_max", scores.step_max},
             {"rank_step_seconds_min", scores.step_min},
             {"bytes_sent_per_sample", static_cast<double>(fit.bytes_sent) * per},
             // Bytes that crossed between the host and this rank's device per training sample
             // (0 on the CPU backend; the counting device and CUDA count theirs).
             {"host_device_bytes_per_sample", fit.host_device_bytes_per_sample()},
             {"bytes_received_per_sample", static_cast<double>(fit.bytes_received) * per},
             // DCT: achieved compression (uncompressed payload / payload sent; 0: no such traffic)
             // and bytes on the wire per sample, model-parallel and data-parallel separately.
             {"mp_compression", fit.mp_compression()},
             {"dp_compression", fit.dp_compression()},
             {"mp_bytes_sent_per_sample", static_cast<double>(fit.mp_bytes_sent) * per},
             {"dp_bytes_sent_per_sample", static_cast<double>(fit.dp_bytes_sent) * per},
             // The issue's definition of achieved compression: bytes sent / bytes uncompressed.
             {"mp_sent_fraction", ratio(fit.mp_payload_sent, fit.mp_payload_uncompressed)},
             {"dp_sent_fraction", ratio(fit.dp_payload_sent, fit.dp_payload_uncompressed)},
             {"mp_payload_sent", fit.mp_payload_sent},
             {"mp_payload_uncompressed", fit.mp_payload_uncompressed},
             {"dp_payload_sent", fit.dp_payload_sent},
             {"dp_payload_uncompressed", fit.dp_payload_uncompressed},
             // What the default exact exchange of the touched rows would have sent instead.
             {"dp_payload_touched", fit.dp_payload_touched},
             {"rank", rank},
             {"peak_rss_bytes", peak_rss_bytes()},
             // This rank's weights, optimizer state and LSH tables, in bytes and per local parameter.
             {"model_state_bytes", model_state(model, trainer)},
             // Whole-job restarts so far under `frugal launch --max-restarts` (0 otherwise).
             {"restarts", restarts},
             // Where this rank's steps spent their time and the work of each phase (frugal bench roofline).
             {"profile", profile_to_json(fit.profile, fit.group_samples)}};
  if (scores.valid_p1) line["valid_p@1"] = *scores.valid_p1;
  if (a.compress == Compress::auto_ && trainer.reducer() != nullptr) {
    const AutoKeepSummary k = auto_keep_summary(trainer);
    line["dp_auto"] = {{"keep_min", k.keep_min}, {"keep_max", k.keep_max}, {"energy_min", k.energy_min},
                       {"energy_max", k.energy_max}, {"backoffs", k.backoffs}};
  }
  line["parameter_rows"] = parameter_rows(model, fit);
  if (a.update_threshold > 0) {  // --update-threshold: rows held back so far (of the rows the rule saw)
    const optim::Optimizer& o = trainer.optimizer();
    line["deferred_rows"] = {{"deferred", o.deferred_rows()}, {"listed", o.threshold_rows()},
                             {"fraction", o.threshold_rows() > 0 ? static_cast<double>(o.deferred_rows()) /
                                                                       static_cast<double>(o.threshold_rows())
                                                                 : 0.0}};
  }
  return line;
}

// Rank 0's lines for an epoch: its scores, the model state's memory, and with several ranks the
// bytes on the wire, --compress auto's keeps (backoffs_said: the back-offs already reported) and the
// model ranks' step times.
void print_epoch(const TrainArgs& a, uint64_t epoch, const FitResult& fit, const EpochScores& s, const Model& model,
                 const Trainer& trainer, int world_size, const Grid& grid, uint64_t& backoffs_said) {
  const EvalResult& ev = s.ev;
  const auto psp = [&](size_t k) { return psp_value(ev, s.has_test, k); };
  if (s.has_test)
    fmt::print("epoch {}: loss {:.4f}, {:.0f} train samples/s, {:.0f} active labels/point, P@1 {:.4f}, P@3 {:.4f}, "
               "P@5 {:.4f}, nDCG@5 {:.4f}, PSP@5 {}{} (eval {:.1f} s)\n",
               epoch, fit.loss, fit.samples_per_s, fit.labels_scored_per_sample, ev.p(1), ev.p(3), ev.p(5), ev.ndcg.at(5),
               psp(5).is_null() ? std::string("n/a") : fmt::format("{:.4f}", psp(5).get<double>()), s.valid_p1 ? fmt::format(", valid P@1 {:.4f}", *s.valid_p1) : "", ev.seconds);
  else
    fmt::print("epoch {}: loss {:.4f}, {:.0f} train samples/s, {:.0f} active labels/point, no test points{}\n", epoch,
               fit.loss, fit.samples_per_s, fit.labels_scored_per_sample,
               s.valid_p1 ? fmt::format(", valid P@1 {:.4f}", *s.valid_p1) : "");
  // The memory the optimizer choice and --precision move (the record's model_state_bytes).
  const nlohmann::json state = model_state(model, trainer);
  const auto mib = [&](const char* key) { return state[key].get<double>() / double(1 << 20); };
  fmt::print("  model state{}: {:.1f} MiB, {:.2f} B/parameter (weights {:.1f}, optimizer {:.1f}, LSH tables {:.1f} "
             "MiB)\n", world_size > 1 ? " (rank 0)" : "", mib("total"), state["per_parameter"].get<double>(),
             mib("weights"), mib("optimizer"), mib("lsh_tables"));
  if (world_size > 1) {
    const auto per_sample = [&](uint64_t bytes) {
      return fit.group_samples > 0 ? static_cast<double>(bytes) / static_cast<double>(fit.group_samples) : 0.0;
    };
    std::string line = fmt::format("  wire: {:.0f} B/sample sent", per_sample(fit.bytes_sent));
    if (grid.model > 1)
      line += fmt::format(", model-parallel {:.0f} (DCT-MP compression {:.1f}x)", per_sample(fit.mp_bytes_sent),
                          fit.mp_compression());
    if (grid.data > 1)
      line += fmt::format(", data-parallel {:.0f} ({:.1f}x less than a dense all-reduce)",
                          per_sample(fit.dp_bytes_sent), fit.dp_compression());
    fmt::print("{}\n", line);
    if (grid.data > 1 && a.compress == Compress::auto_) {
      const AutoKeepSummary k = auto_keep_summary(trainer);
      fmt::print("  compress auto (rank 0): DCT-DP keeps {:.4f} to {:.4f} per parameter, carrying {:.0f}% to "
                 "{:.0f}% of the gradient's energy{}\n",
                 k.keep_min, k.keep_max, 100.0 * k.energy_min, 100.0 * k.energy_max,
                 k.backoffs > backoffs_said
                     ? fmt::format("; backed off {} times this epoch (the error grew)", k.backoffs - backoffs_said)
                     : "");
      backoffs_said = k.backoffs;
    }
    if (grid.model > 1)
      fmt::print("  step compute time over the model ranks: {:.4f} s (slowest) / {:.4f} s (fastest)\n",
                 s.step_max, s.step_min);
  }
}

// --resume: the newest intact checkpoint of the folder loaded into the model and trainer (the
// early-stopping state too), said on rank 0.
struct Resumed {
  CheckpointInfo info;
  std::vector<SkippedCheckpoint> skipped;  // damaged newer ones passed over
};
Resumed resume_run(const TrainArgs& a, comm::Communicator& world, Model& model, Trainer& trainer,
                   const nlohmann::json& resume_config, EarlyStopping& stopper) {
  const int rank = world.rank();
  // The newest checkpoint whose files are all intact, the same on every rank (train/resume_choice.h);
  // a damaged one is passed over out loud, even with --quiet.
  const CheckpointChoice choice = choose_resume_checkpoint(a.resume, a.accept_unchecked_checkpoint, world);
  const CheckpointManifest info = load_checkpoint(a.resume, choice.manifest, model, trainer, resume_config);
  if (rank == 0 && !choice.skipped.empty())
    fmt::print(stderr, "--resume {}: resuming from the older checkpoint {} (epoch {}, step {})\n", a.resume,
               choice.manifest_file, info.epoch, info.step);
  if (info.run_state.contains("early_stopping")) {
    const auto& e = info.run_state["early_stopping"];
    stopper = EarlyStopping(a.early_stopping, {.best = e.at("best"), .best_epoch = e.at("best_epoch"),
                                               .epochs_without_improvement = e.at("epochs_without_improvement")});
  }
  if (!a.quiet)
    fmt::print("resumed from {} at epoch {}, step {} (saved by {} rank(s) in {} model slice(s))\n", a.resume,
               info.epoch, info.step, info.world_size, info.model_slices);
  if (!a.quiet && trainer.has_feedback_state() && !info.dct_residuals_restored)
    fmt::print("DCT-DP residuals start empty: the checkpoint has none for this grid (saved {})\n",
               info.has_dct_residuals ? "on another grid" : "without --dp-keep");
  return {.info = info, .skipped = choice.skipped};
}

// --infer ensemble: the label centroids and nearest training points of the training set, on every
// rank (each ranks the whole batch the same way), and next to the checkpoint for predict / evaluate.
// The ranker points at the members: the struct stays where it was made.
struct Ensemble {
  std::optional<data::LabelCentroids> centroids;
  std::optional<data::NearestPoints> points;
  std::optional<EnsembleRanker> ranker;
};
void build_ensemble(const TrainArgs& a, const data::Dataset& train, Ensemble& e) {
  const auto t = std::chrono::steady_clock::now();
  EnsembleMembers members;
  if (a.infer.ensemble.weight > 0.0f) members.centroids = &e.centroids.emplace(train);
  if (a.infer.ensemble.knn_weight > 0.0f) members.points = &e.points.emplace(train);
  e.ranker.emplace(members, a.infer.ensemble);
  const double mib = static_cast<double>((e.centroids ? e.centroids->bytes() : 0) + (e.points ? e.points->bytes() : 0)) /
                     double(1 << 20);
  if (!a.quiet)
    fmt::print("--infer ensemble: {:.1f} MiB of label centroids and nearest training points in {:.1f} s; evaluation "
               "blends the network ({:g}) with the centroids ({:g}) and the {} nearest points' votes ({:g}), "
               "temperature {:g}\n",
               mib, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(),
               1.0f - a.infer.ensemble.weight - a.infer.ensemble.knn_weight, a.infer.ensemble.weight,
               a.infer.ensemble.neighbours, a.infer.ensemble.knn_weight, a.infer.ensemble.temperature);
}

// What each epoch's evaluation scores with. Propensity-scored metrics weigh hits by the training
// label counts; the counts are kept next to the checkpoint so a saved model can be scored the same
// way without its training file (an empty training set has none: PSP@k is left out). --infer
// ensemble's members. Made where it stays: the options point into it.
struct Scoring {
  LabelCounts label_counts;
  std::optional<Propensities> propensities;
  Ensemble ensemble;
  EvalOptions options;
  Scoring(const TrainArgs& a, const data::Dataset& train) : label_counts(LabelCounts::of(train)) {
    if (label_counts.points > 0) propensities.emplace(label_counts);
    if (a.infer.mode == InferMode::ensemble) build_ensemble(a, train, ensemble);
    options = {.k = {1, 3, 5}, .batch = a.eval_batch, .inference = a.infer.layer_mode(),
               .inference_candidates = a.infer.candidates, .propensities = propensities ? &*propensities : nullptr,
               .ensemble = ensemble.ranker ? &*ensemble.ranker : nullptr};
  }
  Scoring(const Scoring&) = delete;
  Scoring& operator=(const Scoring&) = delete;

  // Writes this run's files beside the checkpoint folder `dir` (label counts, the ensemble's
  // members; rank 0 alone), once per folder, right before the run's first checkpoint there: a run
  // that fails before it leaves the folder's last good checkpoint and its files as they were. A
  // member file that an earlier run left and this one does not write goes, or this run's manifest
  // would record it as its own (train/checkpoint_manifest.h, verify_member_file).
  void keep_beside(const std::string& dir, int rank) const {
    if (dir.empty() || rank != 0 || !kept_in_.insert(dir).second) return;
    for (const char* name : kCheckpointMemberFiles) {
      std::error_code ignored;  // absent: nothing to remove
      std::filesystem::remove(std::filesystem::path(dir) / name, ignored);
    }
    if (propensities) save_label_counts(dir, label_counts);
    if (ensemble.centroids) ensemble.centroids->save(dir);
    if (ensemble.points) ensemble.points->save(dir);
  }

 private:
  mutable std::set<std::string> kept_in_;
};

// --compress and the DCT flags resolved (apply_compress), --dp-compress auto's target chosen where
// --dp-keep asks for DCT-DP (returned: what it chose), and the combinations checked.
std::optional<DpTargetChoice> settle_compression(TrainArgs& a, const data::Dataset& train, const Backend& backend) {
  apply_compress(a);
  std::optional<DpTargetChoice> dp_auto;
  if (a.dp_keep && !a.dp_compress && a.parallel != ParallelMode::data) {
    dp_auto = resolve_dp_target(a, train, backend);
    a.dp_compress = dp_auto->target;
  }
  check_precision(a);
  check_dgc(a, backend);
  return dp_auto;
}

// --compress link: off where the replicas share one machine or there are none; else the link to the
// other replicas is measured (link_rate) and auto is chosen where compressing pays. The DCT settings
// are resolved again for what it chose (dp_auto: --dp-compress auto's target). Returns what it
// measured and chose (nothing under another --compress).
std::optional<CompressChoice> choose_link_compression(TrainArgs& a, const data::Dataset& train, const Backend& backend,
                                                      comm::Communicator* data_group, std::optional<double>& link_rate,
                                                      std::optional<DpTargetChoice>& dp_auto) {
  if (a.compress != Compress::link) return std::nullopt;
  std::optional<CompressChoice> compress_choice;
  if (link_stands_aside(a) || data_group == nullptr || data_group->size() == 1) {
    // off: the hand-set keeps (or none) as given
  } else if (replicas_share_one_network(*data_group)) {
    if (!a.quiet)
      fmt::print("compress link: the {} replicas share this machine's loopback, where compression does not pay: "
                 "the exchange stays uncompressed (--compress auto compresses anyway)\n", data_group->size());
  } else {
    link_rate = probe_link_rate(*data_group);
    TrainArgs with_auto = a;
    with_auto.compress = Compress::auto_;
    apply_compress(with_auto);
    compress_choice = probe_compress_choice(*data_group, *link_rate, *dp_compression(with_auto));
    if (!a.quiet) fmt::print("{}\n", compress_choice_note(*compress_choice));
  }
  // Model slices alone stay uncompressed: their boundary traffic is small next to a replica's
  // gradients (docs/distributed.md: when to turn --compress auto on).
  a.compress = compress_choice && compress_choice->pays() ? Compress::auto_ : Compress::off;
  if (auto chosen = settle_compression(a, train, backend)) dp_auto = chosen;
  return compress_choice;
}

// What the optimizer became: rank 0 says what --optimizer auto chose, and where a row-wise optimizer
// falls back to per-element state.
void note_optimizer(const TrainArgs& a, const Trainer& trainer, int rank) {
  // Row-wise state needs whole rows: a model slice of the input layer (part of every row) is updated
  // per element instead, said once (even with --quiet: it is not what the flag asked for).
  if (rank == 0 && a.optimizer_choice)
    for (const std::string& name : trainer.optimizer().row_wise_fallbacks())
      fmt::print(stderr, "note: --optimizer {}: {} is sliced by columns over the model-parallel group (each rank has "
                         "part of every row), so it keeps per-element {} state\n",
                 optim::to_string(a.optimizer), name,
                 a.optimizer == optim::Method::rowwise_adagrad ? "Adagrad" : "Adam");
  if (rank == 0 && !a.quiet && !a.optimizer_choice)
    fmt::print("optimizer auto: {}{}{}\n", optim::to_string(a.optimizer),
               a.optimizer_from_checkpoint ? fmt::format(" (the checkpoint's, --resume {})", a.resume)
               : a.optimizer == optim::Method::rowwise_adam
                   ? fmt::format(" (one second moment per row of the LSH output layer, per-element Adam elsewhere, --lr {:g})",
                                 effective_lr(a))
                   : a.sampler == layers::Sampler::exact ? " (the exact softmax)" : "",
               trainer.optimizer().row_wise_fallbacks().empty()
                   ? ""
                   : "; the input layer's model slices keep per-element Adam state");
}

// The data a run trains on: the training and test sets (files, or in memory from another program),
// and --valid-fraction's seeded held-out part of the training set (the same on every rank).
struct RunData {
  TrainInputs inputs;
  std::optional<data::Split> held_out;
  bool in_memory = false;  // given by another program (apps/train_in_process.h), not read from files
  double parse_seconds = 0.0;
  const data::Dataset& train() const { return held_out ? held_out->train : inputs.train; }
  const data::Dataset* valid() const { return held_out ? &held_out->test : nullptr; }
};

RunData load_run_data(TrainArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  RunData d;
  d.in_memory = a.in_process != nullptr && a.in_process->train;
  d.inputs = d.in_memory ? TrainInputs{.train = std::move(*a.in_process->train), .test = std::move(*a.in_process->test)}
                         : load_train_test(a.format, a.train, a.test);
  const data::Dataset& test = d.inputs.test;
  FRUGAL_CHECK(test.num_features == d.inputs.train.num_features && test.num_labels == d.inputs.train.num_labels,
               fmt::format("{} has {} features and {} labels, but {} has {} and {}", a.test, test.num_features,
                           test.num_labels, a.train, d.inputs.train.num_features, d.inputs.train.num_labels));
  if (a.valid_fraction > 0)
    d.held_out = data::split(d.inputs.train,
                             {.test_fraction = a.valid_fraction, .seed = Rng(a.seed).split(0x7a11d).next_u64()});
  d.parse_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

// Compute seconds per step (communication waits excluded), the slowest and fastest rank of the
// model group: what --slice-weights balances. Collective over the model group.
std::pair<float, float> model_step_times(const FitResult& fit, const Model& model, comm::Communicator& model_group) {
  std::vector<float> step_max{static_cast<float>(fit.step_seconds())}, step_min = step_max;
  // A rank left out (an empty slice) computes next to nothing: the fastest is among the others.
  const auto [own_begin, own_end] = model.output().placement().own_slice(model.output().out_features());
  if (own_begin == own_end) step_min[0] = std::numeric_limits<float>::infinity();
  if (model_group.size() > 1) {
    model_group.all_reduce(step_max, comm::ReduceOp::max).wait();
    model_group.all_reduce(step_min, comm::ReduceOp::min).wait();
  }
  return {step_max[0], step_min[0]};
}

// Whether the DCT-DP notes were printed already (once a run each).
struct LinkCostSaid {
  bool no_pay = false, would_pay = false;
};

// DCT-DP between replicas, against the link rate measured between them (apps/dct_cost.h): on, whether
// it pays; off (no --dp-keep), whether it would (the exchange outweighing the step). Into the epoch
// record, and said once.
void add_link_cost(const TrainArgs& a, const FitResult& fit, double link_rate, bool chosen_by_link,
                   nlohmann::json& line, LinkCostSaid& said) {
  if (a.dp_keep) {
    const DctDpCost cost = dct_dp_cost(fit, link_rate);
    line["dct_dp_cost"] = to_json(cost);
    const std::string flag = chosen_by_link                 ? "--compress auto (chosen by --compress link)"
                             : a.compress == Compress::auto_ ? "--compress auto"
                                                             : "--dp-keep";
    if (!cost.pays() && !said.no_pay && !a.quiet) fmt::print("{}\n", does_not_pay_note(cost, flag));
    said.no_pay = said.no_pay || !cost.pays();
  } else {
    const DpExchangeCost cost = dp_exchange_cost(fit, link_rate);
    line["dp_exchange_cost"] = to_json(cost);
    if (cost.would_pay() && !said.would_pay && !a.quiet) fmt::print("{}\n", would_pay_note(cost));
    said.would_pay = said.would_pay || cost.would_pay();
  }
}

// --transport-map (an mpirun job routing each kind of operation over MPI or ZeroMQ): the bytes the
// training groups sent so far over each transport ({"mpi": B, "zmq": B}); null where no group routes.
nlohmann::json transport_bytes_sent(std::initializer_list<const comm::Communicator*> groups) {
  nlohmann::json out;
  for (const comm::Communicator* g : groups)
    if (const auto* routed = dynamic_cast<const comm::RoutedCommunicator*>(g)) {
      if (out.is_null()) out = nlohmann::json::object();
      for (const comm::Transport t : {comm::Transport::mpi, comm::Transport::zmq}) {
        const std::string key(comm::to_string(t));
        out[key] = out.value(key, uint64_t{0}) + routed->stats_of(t).total().sent;
      }
    }
  return out;
}

// The weights alone, before they are allocated (--memory-limit, else the machine's available memory).
void check_weights_fit(const TrainArgs& a, const data::Dataset& train, const Grid& grid) {
  // The weights alone, before they are allocated: the input and output layers and every hidden
  // one are sliced over the model group.
  const std::vector<size_t> widths = network_spec(a, train).hidden_widths();
  double weights = static_cast<double>(train.num_features) * static_cast<double>(widths.front()) +
                   static_cast<double>(widths.back()) * static_cast<double>(train.num_labels);
  for (size_t i = 1; i < widths.size(); ++i) weights += static_cast<double>(widths[i - 1]) * static_cast<double>(widths[i]);
  check_model_memory(weights * (a.precision == Dtype::bf16 ? 2.0 : 4.0) / grid.model,
                     fmt::format("{:.3g} weights: {} features, hidden {}, {} labels, over {} model slice(s)", weights,
                                 train.num_features, fmt::join(widths, ","), train.num_labels, grid.model),
                     a.memory_limit_mib, "make --hidden / --layers smaller, or use more ranks");
}

// What every rank must agree on before training starts (compared at rendezvous; also the metrics
// log's start line "config"): what run_config resolves (the network, the optimizer), the DCT settings
// as resolved, every other flag as given (flag_settings: a setting already recorded keeps its resolved
// value), and the data's fingerprints.
nlohmann::json rendezvous_config(const TrainArgs& a, const TrainInputs& inputs, const data::Dataset& train,
                                 bool in_memory) {
  nlohmann::json config = run_config(a, train);
  // The target auto runs with (under link, before it chooses: --compress-energy as given, 0 unset).
  config["compress_energy"] = a.compress == Compress::auto_ && dp_compression(a) ? dp_compression(a)->auto_energy
                                                                                   : a.compress_energy;
  config["dp_keep"] = a.dp_keep ? nlohmann::json(*a.dp_keep) : nlohmann::json();
  if (a.dp_compress) config["dp_compress"] = std::string(comm::to_string(*a.dp_compress));
  if (!a.dp_keep_param.empty()) config["dp_keep_param"] = a.dp_keep_param;
  if (const auto dp = dp_compression(a)) {
    config["dp_select"] = dp->per_row ? "row" : dp->row_floor ? "floor" : "global";
    config["dp_keep_input"] = dp->keep_for(kInputLayerPrefix);
    config["dp_wire_dtype"] = std::string(comm::to_string(dp->wire));
  }
  config["mp_wire_dtype"] = std::string(comm::to_string(mp_compression(a).wire));
  record_infer(a.infer, config);
  {
    // --max-message-bytes or its variable: a rank with another limit refuses the others' messages.
    const char* env = std::getenv(std::string(comm::env::kMaxMessageBytes).c_str());
    config["max_message_bytes"] = a.comm.given(comm::env::kMaxMessageBytes).value_or(env != nullptr ? env : "default");
  }
  for (const auto& [key, value] : a.flag_settings.items())
    if (!config.contains(key)) config[key] = value;
  // Ranks must read the same data: a copy with the same header but other lines (say, shuffled) is
  // other data. Compared at rendezvous only: resume_config (below, what --resume compares) leaves the
  // fingerprints out, so a checkpoint resumes on another file of the same data. An IDX prefix is no
  // single file and gets none.
  // The whole file's hash where the reader computed it as it read (XMC), else the sampled fingerprint.
  const auto fingerprint_of = [](const data::Dataset& d, const std::string& path) {
    return !d.content_hash.empty() ? d.content_hash : data::fingerprint(path).to_string();
  };
  if (!in_memory && std::filesystem::is_regular_file(a.train)) config["train_fingerprint"] = fingerprint_of(inputs.train, a.train);
  if (!in_memory && std::filesystem::is_regular_file(a.test)) config["test_fingerprint"] = fingerprint_of(inputs.test, a.test);
  return config;
}

// --pipeline S: the flags resolved as for the other modes, the combinations a pipeline does not
// implement refused by name, and the run handed to apps/pipeline_run.h.
int run_pipeline_train(TrainArgs& a, comm::Communicator& world, const RunData& data, Backend& backend,
                       const nlohmann::json& config, const Grid& grid, uint64_t restarts) {
  const auto refuse = [](bool bad, const std::string& what) {
    FRUGAL_CHECK(!bad, fmt::format("--pipeline: {} is not implemented for pipeline stages", what));
  };
  refuse(a.parallel == ParallelMode::data, "--parallel data");
  refuse(!a.slice_weights.empty(), "--slice-weights (stages are split by --stage-split)");
  refuse(a.valid_fraction > 0.0, "--valid-fraction");
  refuse(a.early_stopping > 0, "--early-stopping");
  refuse(a.dp_compress == comm::DpTarget::updates, "--dp-compress updates (use gradients)");
  refuse(a.dp_momentum_correction, "--dp-momentum-correction");
  refuse(a.sparse_updates == optim::SparseUpdates::catchup, "--sparse-updates catchup");
  const data::Dataset& train = data.train();
  const int rank = world.rank();
  check_weights_fit(a, train, grid);  // --memory-limit, as every trainer checks it
  if (a.compress == Compress::link) a.compress = Compress::off;  // stage boundaries and replicas as given
  PipelineRun r;
  r.train = &train;
  r.test = &data.inputs.test;
  r.spec = network_spec(a, train);
  r.backend = &backend;
  r.stages = grid.stages;
  r.replicas = grid.data;
  r.slices = grid.model;
  r.stage_split = parse_stage_split(a.stage_split);
  const TrainerOptions trainer = trainer_options(a, train.size());
  r.options.micro_batches = a.micro_batches > 0 ? a.micro_batches : default_micro_batches(grid.stages, a.batch);
  r.options.boundary = mp_compression(a);
  // A compressed boundary trains as the uncompressed one only after a warm-up (bench/REPORT.md,
  // Cluster: --mp-keep 0.1 lost 7.3 points of P@1 without one; with the kept fraction falling over
  // the first epoch 1.2 to 2.1, over the first two epochs none), and error feedback kept the seeds
  // closer: those are its defaults; turned off by hand, the log says so.
  const bool compressed = r.options.boundary.keep < 1.0 || r.options.boundary.mass < 1.0;
  const size_t replicas = static_cast<size_t>(grid.data);
  const size_t epoch_steps = std::max<size_t>(1, (train.size() + a.batch * replicas - 1) / (a.batch * replicas));
  if (compressed && !a.mp_warmup_given) r.options.boundary.warmup_steps = 2 * epoch_steps;
  if (compressed && !a.mp_error_feedback_given) r.options.boundary.error_feedback = true;
  if (compressed && rank == 0 && !a.quiet && ((a.mp_warmup_given && a.mp_warmup_steps == 0) ||
                                              (a.mp_error_feedback_given && !a.mp_error_feedback)))
    fmt::print(stderr, "note: a compressed pipeline boundary without {} lost P@1 in bench/pipeline (up to 7 points; "
                       "the defaults: a warm-up over the first two epochs and error feedback)\n",
               a.mp_warmup_given && a.mp_warmup_steps == 0 ? "a warm-up" : "error feedback");
  r.options.dp = dp_compression(a);
  r.options.optimizer = trainer.optimizer;
  r.options.lr_schedule = trainer.lr_schedule;
  r.options.clip_norm = trainer.clip_norm;
  r.options.dropout = trainer.dropout;
  r.options.on_divergence = trainer.on_divergence;
  r.batch = a.batch;
  r.epochs = a.epochs;
  r.eval_batch = a.eval_batch;
  r.max_steps = a.max_steps;
  r.seed = a.seed;
  r.quiet = a.quiet || rank != 0;
  r.centroid_init = a.output_init == OutputInit::centroid;
  r.centroid_scale = a.centroid_scale;
  r.metrics = a.metrics;
  r.checkpoint = a.checkpoint;
  r.resume = a.resume;
  r.keep_checkpoints = a.keep_checkpoints;
  r.accept_unchecked_checkpoint = a.accept_unchecked_checkpoint;
  r.start_config = config;
  // What checkpoints record, as the other trainers record it: the run's settings and how it infers
  // (so `frugal predict` / `evaluate` infer as the run did).
  r.checkpoint_config = run_config(a, train);
  record_infer(a.infer, r.checkpoint_config);
  r.restarts = restarts;
  if (a.in_process != nullptr && a.in_process->on_epoch) r.on_epoch = a.in_process->on_epoch;
  if (rank == 0 && !r.quiet && !a.data_defaults_line.empty()) fmt::print("{}\n", a.data_defaults_line);
  const Scoring scoring(a, train);
  r.eval = scoring.options;
  r.before_checkpoint = [&scoring, rank](const std::string& dir) { scoring.keep_beside(dir, rank); };
  return run_pipeline(world, std::move(r));
}

int run_train(TrainArgs a) {
  kernels::set_bf16_dot(a.bf16_dot);  // before any op on bf16 weights; `on` without the instruction fails here
  Backend& backend = choose_device(a.device, a.threads);
  const RunData data = load_run_data(a);
  const data::Dataset& test = data.inputs.test;
  const data::Dataset& train = data.train();
  const data::Dataset* valid = data.valid();
  const TrainInputs& inputs = data.inputs;
  const bool in_memory = data.in_memory;
  const double parse_seconds = data.parse_seconds;
  apply_data_defaults(a, train);
  // --dp-keep with --dp-compress auto: what it chose
  std::optional<DpTargetChoice> dp_auto = settle_compression(a, train, backend);
  // Every rank reads its own copy of the data; ranks that disagree on a setting refuse to start.
  const nlohmann::json config = rendezvous_config(a, inputs, train, in_memory);
  const auto world = comm::init(a.comm.init_options(to_run_config(config)));
  const int rank = world->rank();
  const uint64_t restarts = restart_count();
  if (rank == 0 && a.comm.given(comm::env::kTransportMap) && world->backend() != "mpi" && world->backend() != "mpi+zmq")
    fmt::print(stderr, "note: --transport-map applies to jobs mpirun starts (the ranks also open the ZeroMQ mesh); this "
                       "run's ranks use {} alone: ignored\n", world->backend());
  const Grid grid = process_grid(a, world->size());
  if (a.pipeline > 0) return run_pipeline_train(a, *world, data, backend, config, grid, restarts);
  check_weights(a, grid.model);
  auto model_group = world->split(rank / grid.model, rank);
  // A model group that mixes devices (a GPU rank next to CPU ranks) sizes its slices by measured
  // speed unless --slice-weights says otherwise: equal slices would keep the GPU waiting on the CPUs.
  if (a.slice_weights.empty() && a.parallel == ParallelMode::model &&
      group_mixes_devices(model_group.get(), device_name(backend))) {
    a.auto_weights = true;
    if (rank == 0)
      fmt::print("the model group mixes GPU and CPU ranks: --slice-weights auto (shares from measured speed; "
                 "--slice-weights 1,1,.. keeps equal slices)\n");
  }
  if (rank != 0) a.quiet = true;  // one voice: rank 0 prints, every rank logs its metrics
  if (!a.quiet && !a.data_defaults_line.empty()) fmt::print("{}\n", a.data_defaults_line);
  // Dense products in bf16 where the device has them (the weights stay f32; autocast's split).
  const bool bf16_products = backend.set_bf16_products(a.precision == Dtype::bf16) && a.precision == Dtype::bf16;
  note_precision(a, bf16_products);
  note_straight_through(a, grid.model);
  note_forward_split(a, grid.model);
  note_momentum_correction(a, grid.data);
  note_cuda_alone(a, backend, grid.model);
  auto data_group = cli::data_parallel_group(a.dp_transport, backend, world->split(rank % grid.model, rank),
                                             comm::comm_timeout_seconds(a.comm.init_options({})), !a.quiet);
  // The replicas' link rate: measured once, before any epoch counts traffic (apps/dct_cost.h).
  std::optional<double> link_rate;
  // --compress link: what it measured and chose
  const std::optional<CompressChoice> compress_choice = choose_link_compression(a, train, backend, data_group.get(),
                                                                                link_rate, dp_auto);
  note_compress(a, grid);
  if (!a.quiet)
    fmt::print("read {} train and {} test points ({} features, {} labels, {:.1f} nnz/point) in {:.1f} s\n",
               inputs.train.size(), test.size(), train.num_features, train.num_labels, train.average_nonzeros(),
               parse_seconds);
  if (!a.quiet && valid != nullptr)
    fmt::print("validation: {} points held out of the training set, {} train on\n", valid->size(), train.size());
  if (!a.quiet && dp_auto && data_group)
    fmt::print("DCT-DP thresholds {} (--dp-compress auto: a batch touches {:.0f}% of the input rows, {} sampler)\n",
               dp_auto->target == comm::DpTarget::updates ? "the replicas' optimizer updates" : "gradients",
               100.0 * dp_auto->input_rows_touched, layers::to_string(a.sampler));

  check_weights_fit(a, train, grid);
  Model model;
  const auto build = [&](Model& m, const std::vector<double>& weights) {
    layers::build_network(m, network_spec(a, train), Placement::sliced(*model_group, weights));
    m.set_backend(&backend);  // the parameters move into the device's memory (core/layer.h)
  };
  build(model, a.weights);
  TrainerOptions options = trainer_options(a, train.size());
  options.parallel = {.model = model_group.get(), .data = data_group.get(),
                      .dense_gradients = a.parallel == ParallelMode::data};
  options.mp = mp_compression(a);
  options.dp = dp_compression(a);
  // In an optional so that --slice-weights auto can remake it in place (the same object).
  std::optional<Trainer> trainer_slot;
  Trainer& trainer = trainer_slot.emplace(model, options);
  note_optimizer(a, trainer, rank);
  EarlyStopping stopper(a.early_stopping);
  // What a checkpoint must agree with to be resumed (the grid may change: checkpoints reslice).
  const nlohmann::json resume_config = run_config(a, train);
  // What checkpoints record: the same, and how the run infers (predict / evaluate infer the same
  // way by default; a resumed run may infer otherwise, so --resume does not compare it).
  nlohmann::json checkpoint_config = resume_config;
  record_infer(a.infer, checkpoint_config);
  std::optional<CheckpointInfo> resumed_from;
  std::vector<SkippedCheckpoint> resume_skipped;
  if (!a.resume.empty()) {
    Resumed r = resume_run(a, *world, model, trainer, resume_config, stopper);
    resumed_from = r.info;
    resume_skipped = std::move(r.skipped);
  }
  if (!a.quiet)
    fmt::print("model: {} ({} parameters on this rank), device {}, {} threads, {} rank(s) as a {}x{} grid ({})\n",
               model.describe(), model.num_parameters(), device_name(backend), backend.num_threads(), world->size(),
               grid.data, grid.model, world->backend());
  const Scoring scoring(a, train);
  const EvalOptions& eval_options = scoring.options;
  const std::string metrics_file = rank_metrics_path(a.metrics, rank);
  MetricsLog log = metrics_file.empty() ? MetricsLog() : MetricsLog(metrics_file, !a.resume.empty());
  log.write({{"event", "start"}, {"config", config}, {"train", a.train}, {"test", a.test},
             {"train_points", train.size()},
             {"threads", backend.num_threads()}, {"parse_seconds", parse_seconds}, {"device", device_name(backend)},
             {"parameters", model.num_parameters()}, {"model_parameters_total", total_parameters(model)},
             {"epoch", trainer.epoch()}, {"rank", rank},
             {"world_size", world->size()}, {"grid", {grid.data, grid.model}}, {"backend", world->backend()},
             {"overlap", a.overlap}, {"overlap_forward", to_string(a.overlap_forward)},
             // --transport-map: each kind of operation's transport (null: one transport).
             {"transport_map", dynamic_cast<const comm::RoutedCommunicator*>(world.get()) != nullptr
                                   ? nlohmann::json(dynamic_cast<const comm::RoutedCommunicator&>(*world).describe())
                                   : nlohmann::json()},
             // What --compress resolved to (off or auto), and under link what it measured.
             {"compress_chosen", to_string(a.compress)},
             {"compress_choice", compress_choice ? to_json(*compress_choice) : nlohmann::json()}});

  if (resumed_from) {  // the model as restored, scored before any further training
    const EvalResult ev = trainer.evaluate(test, eval_options);
    if (!a.quiet) fmt::print("resumed model: P@1 {:.4f}, P@3 {:.4f}, P@5 {:.4f}\n", ev.p(1), ev.p(3), ev.p(5));
    log.write({{"event", "resume"}, {"epoch", resumed_from->epoch}, {"step", resumed_from->step},
               {"saved_world_size", resumed_from->world_size}, {"saved_model_slices", resumed_from->model_slices},
               {"dct_residuals_restored", resumed_from->dct_residuals_restored},
               {"folder", resumed_from->folder}, {"skipped_checkpoints", skipped_json(resume_skipped)},
               {"p@1", ev.p(1)}, {"p@3", ev.p(3)}, {"p@5", ev.p(5)}});
  }
  if (!resumed_from && a.output_init == OutputInit::centroid) {
    const auto t = std::chrono::steady_clock::now();
    trainer.init_output_from_centroids(train, a.centroid_scale, a.eval_batch);
    if (!a.quiet)
      fmt::print("output rows set to label centroids in hidden space in {:.1f} s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  const Rng seeds(a.seed);
  // DCT-DP between replicas: the link rate between them, to tell whether compression pays
  // (apps/dct_cost.h). DCT-DP on: whether it pays; off (no --dp-keep): whether it would (the
  // exchange outweighing the step).
  if (!link_rate && data_group && data_group->size() > 1 && (!a.dp_keep || *a.dp_keep < 1.0f))
    link_rate = probe_link_rate(*data_group);
  LinkCostSaid said;  // the link-cost notes already printed
  uint64_t backoffs_said = 0;  // --compress auto's back-offs already reported
  // --slice-weights auto: once, in the first epoch of this run (a 1-rank model has nothing to move).
  bool calibrate = a.auto_weights && grid.model > 1;
  RunGroups groups{.world = world.get(), .model = model_group};
  if (a.auto_weights && grid.model == 1 && !a.quiet)
    fmt::print("--slice-weights auto: the model is not sliced (1 model rank), nothing to calibrate\n");
  while (trainer.epoch() < a.epochs && !stopper.should_stop()) {
    const uint64_t epoch = trainer.epoch() + 1;
    const FitOptions fit_options{.batch = a.batch, .seed = seeds.split(100 + epoch).next_u64(),
                                 .progress = !a.quiet, .max_steps = a.max_steps};
    const nlohmann::json transport_before = transport_bytes_sent({groups.model.get(), data_group.get()});
    FitResult fit;
    if (calibrate) {
      calibrate = false;
      fit = calibrated_epoch(a, train, fit_options, groups, grid, model, trainer_slot, build, log);
      if (groups.left) {
        fmt::print("rank {}: left out of the model by --slice-weights auto (too slow to shorten the group's step); "
                   "it has no more work in this run\n", rank);
        log.write({{"event", "left_out"}, {"epoch", epoch}, {"rank", rank}});
        return 0;
      }
    } else {
      fit = trainer.fit_epoch(train, fit_options);
    }
    // The training steps' bytes per transport (the evaluation below sends more).
    const nlohmann::json transport_after = transport_bytes_sent({groups.model.get(), data_group.get()});
    const auto [step_max, step_min] = model_step_times(fit, model, *model_group);
    // A test set of no points (the Python module's test=None, or a file "0 F L") scores nothing:
    // its metrics are null ("no test points"), not zeros.
    const bool has_test = test.size() > 0;
    const EvalResult ev = trainer.evaluate(test, eval_options);
    // P@1 of the validation split (-1: none). A plain double: GCC 12 warns about optional<double>.
    double valid_p1 = valid != nullptr ? trainer.evaluate(*valid, {.k = {1}, .batch = a.eval_batch, .ensemble = eval_options.ensemble}).p(1) : -1.0;
    if (valid != nullptr && groups.world->size() > 1) {
      // Saving the best model is collective: every rank must take rank 0's decision.
      float score = static_cast<float>(valid_p1);
      groups.world->broadcast(std::span<float>(&score, 1), 0).wait();
      valid_p1 = score;
    }
    const EpochScores scores{.ev = ev, .has_test = has_test,
                             .valid_p1 = valid != nullptr ? std::optional<double>(valid_p1) : std::nullopt,
                             .step_max = step_max, .step_min = step_min};
    if (rank == 0) print_epoch(a, epoch, fit, scores, model, trainer, world->size(), grid, backoffs_said);
    std::fflush(stdout);
    nlohmann::json line = epoch_record(a, epoch, fit, scores, trainer, model, rank, restarts);
    if (link_rate && fit.steps > 0) add_link_cost(a, fit, *link_rate, compress_choice.has_value(), line, said);
    if (!transport_before.is_null()) {  // --transport-map: what each transport carried
      for (const auto& [transport, bytes] : transport_after.items())
        line["transport_bytes_sent_per_sample"][transport] =
            fit.group_samples > 0 ? static_cast<double>(bytes.get<uint64_t>() - transport_before.value(transport, uint64_t{0})) /
                                        static_cast<double>(fit.group_samples)
                                  : 0.0;
    }
    if (a.clip_norm > 0) {  // how often clipping acted, to tune --clip-norm
      line["grad_norm"] = fit.grad_norm;
      line["clipped_fraction"] = fit.steps > 0 ? static_cast<double>(fit.clipped_steps) / fit.steps : 0.0;
    }
    if (a.on_divergence == OnDivergence::skip_batch) {
      line["skipped_batches"] = fit.skipped_batches;
      if (fit.skipped_batches > 0 && rank == 0)
        fmt::print(stderr, "warning: epoch {}: {} batch(es) whose loss or gradients were not finite were skipped "
                           "(--on-divergence skip-batch); first at step {}\n", epoch, fit.skipped_batches,
                   fit.diverged_step);
    }
    log.write(line);
    if (a.in_process != nullptr && a.in_process->on_epoch) a.in_process->on_epoch(line.dump());
    const bool best = valid != nullptr && stopper.update(epoch, valid_p1);
    const nlohmann::json run_state = {
        {"early_stopping", {{"best", stopper.state().best}, {"best_epoch", stopper.state().best_epoch},
                            {"epochs_without_improvement", stopper.state().epochs_without_improvement}}}};
    if (best && a.early_stopping > 0) {
      const std::string best_dir = (std::filesystem::path(a.checkpoint) / "best").string();
      scoring.keep_beside(best_dir, rank);  // first: the manifest records the files beside it
      save_checkpoint(best_dir, model, trainer, checkpoint_config, run_state);
    }
    if (!a.checkpoint.empty()) {
      scoring.keep_beside(a.checkpoint, rank);
      save_checkpoint(a.checkpoint, model, trainer, checkpoint_config, run_state, a.keep_checkpoints);
    }
    if (stopper.should_stop() && !a.quiet)
      fmt::print("early stopping: no validation P@1 improvement for {} epochs; the best, {:.4f} after epoch {}, is "
                 "in {}/best\n",
                 a.early_stopping, stopper.state().best, stopper.state().best_epoch, a.checkpoint);
  }
  return 0;
}

// The option fields library errors name, and the flags that set them here.
// No optimizer of frugal's trains at a learning rate beyond this (lr 1e30 diverged in its first step).
constexpr double kMaxLr = 1000;

const FlagNames kTrainFlags = {
    {"LshOptions::tables", "--tables"},
    {"LshOptions::bucket_capacity", "--bucket-capacity"},
    {"LshOptions::min_active", "--min-active"},
    {"LshOptions::max_active", "--max-active"},
    {"LshOptions::rebuild_first", "--rebuild-first"},
    {"LshOptions::rebuild_growth", "--rebuild-growth"},
    {"LshOptions::rebuild_max", "--rebuild-max"},
    {"LshOptions::negatives", "--negatives"},
    {"LshOptions::negative_uniform_share", "--negatives-uniform"},
    {"TrainerOptions::dp", "--dp-keep"},
    {"TrainerOptions::parallel.dense_gradients", "--parallel data"},
    {"DpCompression::keep", "--dp-keep"},
    {"DpCompression::reestimate_every", "--dp-reestimate-every"},
    {"MpCompression::keep", "--mp-keep"},
    {"MpCompression::warmup_steps", "--mp-warmup-steps"},
    {"MpCompression::mass", "--mp-mass"},
    {"optimizer: weight decay must", "optimizer: --weight-decay must"},
};

}  // namespace

// --model dlrm (or --format criteo): the flags of the XMC network do not apply and say so; the
// shared ones go to run_dlrm.
int train_dlrm(const TrainArgs& given, const DlrmArgs& dlrm, const CLI::App& cmd) {
  // --compress auto: DCT-DP's keep on the MLP gradients set online, one tau per parameter (DLRM's
  // selection) at its energy target; link means off here (apply_compress).
  TrainArgs a = given;
  apply_compress(a);
  FRUGAL_CHECK(a.model == ModelKind::dlrm, "--format criteo is click-log data: it trains --model dlrm");
  FRUGAL_CHECK(a.in_process == nullptr || !a.in_process->train,
               "--model dlrm trains from Criteo-format files: give their paths as --train and --test");
  FRUGAL_CHECK(cmd.count("--format") == 0 || a.format == data::DataFormat::criteo,
               fmt::format("--model dlrm reads Criteo-format click logs (--format criteo), not --format {}",
                           data::to_string(a.format)));
  // The DLRM trainer never brings skipped rows up to date before they are read, so catch-up would
  // silently be lazy with extra bookkeeping.
  FRUGAL_CHECK(a.sparse_updates == optim::SparseUpdates::lazy,
               "--model dlrm: --sparse-updates catchup is not implemented (its tables and MLPs update lazily: "
               "leave --sparse-updates at lazy)");
  FRUGAL_CHECK(a.dp_compress != comm::DpTarget::updates,
               "--model dlrm: --dp-compress updates is not implemented (its DCT-DP thresholds the MLP gradients: "
               "leave --dp-compress at its default)");
  FRUGAL_CHECK(!a.dp_momentum_correction,
               "--model dlrm: --dp-momentum-correction is not implemented (its trainer steps the optimizer on the "
               "replicas' thresholded sum; drop the flag)");
  FRUGAL_CHECK(a.pipeline == 0, "--model dlrm: --pipeline is not implemented (its tables and MLPs train data-parallel)");
  FRUGAL_CHECK(a.on_divergence == OnDivergence::stop,
               "--model dlrm: --on-divergence skip-batch is not implemented (a diverged DLRM epoch stops the run)");
  FRUGAL_CHECK(a.grid.empty(), "--model dlrm: --grid does not apply (every rank trains on its part of each batch; "
                               "--table-exchange or --parallel data say how the tables are shared)");
  std::vector<std::string> ignored;
  for (const char* flag : {"--hidden", "--layers", "--sampler", "--hash", "--tables", "--bucket", "--k", "--bin-size",
                           "--active-target", "--negatives", "--infer", "--ensemble-weight", "--ensemble-knn-weight",
                           "--ensemble-temperature", "--ensemble-neighbours", "--output-init", "--slice-weights", "--calibration-steps",
                           "--calibration-warmup",
                           "--valid-fraction", "--early-stopping", "--mp-keep", "--mp-mass", "--mp-wire-dtype", "--lr-schedule", "--clip-norm",
                           "--dropout", "--precision", "--mp-straight-through", "--mp-straight-through-steps",
                           "--mp-error-feedback", "--dp-local-clip", "--overlap", "--overlap-forward"})
    if (const CLI::Option* o = cmd.get_option_no_throw(flag); o != nullptr && o->count() > 0) ignored.emplace_back(flag);
  if (!ignored.empty())
    fmt::print(stderr, "note: {} do(es) not apply to --model dlrm: ignored\n", fmt::join(ignored, ", "));
  return run_dlrm({.train = a.train, .test = a.test, .metrics = a.metrics, .checkpoint = a.checkpoint,
                   .resume = a.resume, .accept_unchecked_checkpoint = a.accept_unchecked_checkpoint,
                   .memory_limit_mib = a.memory_limit_mib, .epochs = a.epochs, .batch = a.batch,
                   .eval_batch = a.eval_batch, .max_steps = a.max_steps,
                   .optimizer = optimizer_options(a),
                   .seed = a.seed,
                   .threads = a.threads, .quiet = a.quiet, .data_parallel = a.parallel == ParallelMode::data,
                   .device = a.device, .comm = a.comm,
                   .dp = dp_compression(a, comm::DpTarget::gradients), .dlrm = dlrm});
}

// `frugal train` on `app`; with `in_process`, inside another program (apps/train_in_process.h).
static CLI::App* add_train_command(CLI::App& app, InProcessTrain* in_process) {
  auto a = std::make_shared<TrainArgs>();
  a->in_process = in_process;
  CLI::App* cmd = app.add_subcommand("train", "train the XMC network: sparse input -> hidden (ReLU) -> softmax");
  cmd->add_option("--train", a->train, "training file (XMC format), or IDX prefix such as .../fashion-mnist/train")
      ->required();
  cmd->add_option("--test", a->test, "test file (XMC format), or IDX prefix such as .../fashion-mnist/t10k")->required();
  add_choice(cmd, "--model", a->model, {ModelKind::xmc, ModelKind::dlrm},
             "xmc: sparse input -> hidden layers -> softmax over labels; dlrm: the DLRM click-through model "
             "(embedding tables, bottom/top MLPs, dot interaction; --format criteo)");
  add_choice(cmd, "--format", a->format, {data::DataFormat::xmc, data::DataFormat::idx, data::DataFormat::criteo},
             "xmc: text files; idx: PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]; criteo: "
             "Criteo-format click logs (--model dlrm; its default)");
  auto dlrm = std::make_shared<DlrmArgs>();
  add_dlrm_options(cmd, *dlrm);
  cmd->add_option("--layers", a->layers, "hidden layer widths, input side first, e.g. 1024,1024 (replaces --hidden)");
  cmd->add_option_function<std::string>(
         "--hidden",
         [a](const std::string& text) {
           a->hidden_auto = text == "auto";
           if (!a->hidden_auto)
             a->hidden = parse_number<size_t>("--hidden", text, "auto or a width from 1 to 1048576",
                                              [](size_t w) { return w >= 1 && w <= (size_t{1} << 20); });
         },
         "hidden layer width; auto: 128, or for few-shot labels (a typical label with <= 8 training points) the "
         "widest of 1024, 512, 256 whose epoch stays within a work budget (the log says what it chose)")
      ->default_str("auto");
  cmd->add_option("--batch", a->batch, "points per step")->capture_default_str()->check(cli::positive());
  cmd->add_option("--epochs", a->epochs, "epochs (in total, counting those of a resumed run)")->capture_default_str();
  cmd->add_option("--lr", a->lr, fmt::format("learning rate (default {} with adam, {} with sgd, {} with adagrad, {} "
                                              "with rowwise-adagrad ({} with --model dlrm), {} with rowwise-adam ({} "
                                              "with --model dlrm))",
                                              optim::Adam{}.lr, optim::Sgd{}.lr, optim::Adagrad{}.lr,
                                              optim::RowwiseAdagrad{}.lr, optim::Adagrad{}.lr, optim::RowwiseAdam{}.lr,
                                              optim::Adam{}.lr))
      ->check(cli::above_up_to(0.0, kMaxLr));  // beyond, the first step diverges: refused before the data is read
  std::vector<std::pair<std::string, std::optional<optim::Method>>> optimizers{{"auto", std::nullopt}};
  for (const optim::Method m : {optim::Method::adam, optim::Method::sgd, optim::Method::adagrad,
                                optim::Method::rowwise_adagrad, optim::Method::rowwise_adam})
    optimizers.emplace_back(optim::to_string(m), m);
  add_choice(cmd, "--optimizer", a->optimizer_choice, optimizers,
             "adam, sgd (with --momentum), adagrad (with --initial-accumulator), rowwise-adagrad (one accumulator "
             "per row of the sparse input layer and of the LSH output layer, per-element Adagrad elsewhere), "
             "rowwise-adam (Adam with one second moment per row of those layers; see --rowwise-momentum), or auto: "
             "rowwise-adam with the LSH sampler, adam with the exact softmax and --model dlrm");
  add_choice(cmd, "--rowwise-layers", a->rowwise_input,
             {{"all", std::optional<bool>(true)}, {"output", std::optional<bool>(false)}},
             "row-wise optimizers: row-wise state on the sparse input layer and the LSH output layer (all: the "
             "default with --optimizer rowwise-*), or on the output layer's label rows only, the input layer keeping "
             "per-element state (output: what --optimizer auto uses)");
  add_choice(cmd, "--rowwise-momentum", a->rowwise_momentum, {{"on", true}, {"off", false}},
             "--optimizer rowwise-adam: keep Adam's per-element first moment on the row-wise layers (on), or "
             "step by the gradient over the row's RMS alone (off: no per-element state at all)");
  add_choice(cmd, "--sparse-updates", a->sparse_updates, {optim::SparseUpdates::lazy, optim::SparseUpdates::catchup},
             "rows without a gradient in a step: lazy (untouched) or catchup (get the missed steps when next "
             "touched, as the dense optimizer would)");
  cmd->add_option("--momentum", a->momentum, "SGD momentum (0: plain SGD)")->capture_default_str()->check(cli::in_range(0.0, 0.9999));
  cmd->add_option("--initial-accumulator", a->initial_accumulator,
                  "Adagrad: the sum of squared gradients every weight starts from (PyTorch's 0: a first step of "
                  "lr * sign(g); TensorFlow's 0.1 outweighs small gradients and needs a larger --lr)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--update-threshold", a->update_threshold,
                  "skip the update of a sparse-input or LSH-output row whose step gradient RMS is below this fraction "
                  "of the row's running gradient RMS; the gradient waits in a residual until it matters or the epoch "
                  "ends (0: off)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--adam-freeze-v-after", a->adam_freeze_v_after,
                  "Adam: freeze each row's second moment after its first N updates (1-bit Adam's frozen "
                  "variance; 0: never). Lets DCT-DP's error-feedback bursts move weights in full")
      ->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "decoupled weight decay W: w -= lr * W * w every step (AdamW)")
      ->capture_default_str()->check(cli::non_negative());
  add_choice(cmd, "--lr-schedule", a->lr_schedule,
             {optim::ScheduleKind::constant, optim::ScheduleKind::linear, optim::ScheduleKind::cosine},
             "learning rate over the run: constant, or linear / cosine decay to 0 over epochs x steps per epoch");
  cmd->add_option("--warmup-steps", a->warmup_steps, "linear learning-rate warm-up from 0 over the first N steps")
      ->capture_default_str();
  cmd->add_option("--clip-norm", a->clip_norm, "clip the global gradient L2 norm to C (0: off)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--dropout", a->dropout, "input-feature dropout probability in training (inverted dropout)")
      ->capture_default_str()->check(cli::in_range(0.0, 0.99));
  cmd->add_option("--valid-fraction", a->valid_fraction, "hold out this seeded fraction of the training set for "
                                                         "validation (valid_p@1 in the epoch lines)")
      ->capture_default_str()->check(cli::in_range(0.0, 0.9));
  cmd->add_option("--early-stopping", a->early_stopping, "stop after N epochs without validation P@1 improvement, "
                                                         "keeping the best model in CHECKPOINT/best (0: off)")
      ->capture_default_str();
  add_choice(cmd, "--sampler", a->sampler, {layers::Sampler::lsh, layers::Sampler::exact},
             "output neurons computed in training");
  add_choice(cmd, "--precision", a->precision, {{"f32", Dtype::f32}, {"bf16", Dtype::bf16}},
             "storage of the sparse input layer's and the LSH softmax's weights and their optimizer moments: f32, "
             "or bf16 (half the memory and bandwidth; computed in f32, updates stored with stochastic rounding)");
  add_choice(cmd, "--bf16-dot", a->bf16_dot,
             {{"auto", kernels::Bf16Dot::auto_}, {"on", kernels::Bf16Dot::on}, {"off", kernels::Bf16Dot::off}},
             "--precision bf16 on the CPU: products over bf16 weight rows (active logits, dLoss/dh, the sparse input "
             "layer) with AVX512-BF16's vdpbf16ps, the f32 side rounded to bf16 (auto: where the CPU has it; off: "
             "widened to f32, the bits of the f32 kernels)");
  add_choice(cmd, "--hash", a->hash, {layers::HashKind::dwta, layers::HashKind::simhash}, "LSH family");
  cmd->add_option("--k", a->k, "LSH bits (simhash) or bins (dwta) per table; 0: chosen from the label count")
      ->check(cli::in_range(0, 24));
  cmd->add_option("--active-target", a->active_target,
                  "LSH: labels per point the automatic hash width (--k 0) aims at from the tables (0: 1.5% of the "
                  "labels, at least 256 and at most 1024)")
      ->capture_default_str()
      ->check(cli::non_negative());  // a size_t option would take -5 as 2^64 - 5
  cmd->add_option("--bin-size", a->bin_size, "DWTA coordinates per bin (power of two)")->capture_default_str()
      ->check(cli::in_range(2, 256));
  cmd->add_option("--tables", a->tables, "LSH tables")->capture_default_str()->check(cli::in_range(1, 4096));
  cmd->add_option("--bucket-capacity", a->bucket, "LSH bucket capacity (random eviction)")->capture_default_str()
      ->check(cli::in_range(1, 65536));
  cmd->add_option("--min-active", a->min_active, "top active sets up to this size with random labels")->capture_default_str();
  cmd->add_option("--max-active", a->max_active, "cap active sets at this size (0: no cap)")->capture_default_str();
  cmd->add_option("--negatives", a->negatives, "LSH: random negatives drawn per point in training, from a mix of "
                                              "label frequency and uniform (0: none)")->capture_default_str();
  cmd->add_option("--negatives-uniform", a->negatives_uniform, "LSH: uniform share of the negatives' proposal "
                                                               "(the rest follows label frequency)")
      ->capture_default_str()->check(cli::in_range(0.0, 1.0));
  add_choice(cmd, "--logq", a->logq, {{"on", true}, {"off", false}},
             "LSH: correct random negatives' logits by their sampling probability");
  add_infer_options(cmd, a->infer_flags, "ensemble on few-shot labels (a typical label with <= 8 training points), "
                                          "else exact");
  add_choice(cmd, "--output-init", a->output_init_choice,
             {{"auto", std::nullopt}, {"random", OutputInit::random}, {"centroid", OutputInit::centroid}},
             "output rows: random, or each label's centroid in hidden space (a nearest-centroid classifier to "
             "start from; trains at --lr 1e-3 when --lr is not given on few-shot labels); auto: centroid for "
             "few-shot labels (a typical label with <= 8 training points), else random");
  cmd->add_option("--centroid-scale", a->centroid_scale, "logit of a point along its label's centroid, per RMS "
                                                         "hidden norm (--output-init centroid)")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--rebuild-first", a->rebuild_first, "steps before the first LSH table rebuild")->capture_default_str();
  cmd->add_option("--rebuild-growth", a->rebuild_growth, "factor by which rebuild intervals grow")->capture_default_str()
      ->check(cli::in_range(1.0, 1e6));  // beyond, an interval times it is no step count (a cast to 64 bits)
  cmd->add_option("--rebuild-max", a->rebuild_max, "longest interval between rebuilds (steps)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "compute threads (0: all cores, divided among the ranks frugal launch or mpirun starts on this host)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of every random choice")->capture_default_str();
  cmd->add_option("--max-steps", a->max_steps, "end each epoch after this many steps (0: whole epochs); for "
                                               "throughput measurements")->capture_default_str();
  cmd->add_option("--eval-batch", a->eval_batch, "points per evaluation batch")->capture_default_str()
      ->check(cli::positive());
  cmd->add_option("--metrics", a->metrics, "append-free JSON-lines metrics log (FILE.jsonl)");
  cmd->add_option("--checkpoint", a->checkpoint, "save a checkpoint here after every epoch");
  cmd->add_option("--resume", a->resume, "continue from the newest intact checkpoint in this directory (a damaged "
                                        "newer one is skipped, saying why)");
  add_accept_unchecked_flag(cmd, a->accept_unchecked_checkpoint);
  add_strict_flag(cmd);
  cmd->add_option("--keep-checkpoints", a->keep_checkpoints, "--checkpoint: keep the newest K checkpoints (older "
                                                             "ones are --resume's fallback); 1: the newest only")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--grid", a->grid, "process grid DxM: D data-parallel replicas of M ranks slicing the model "
                                      "(default 1xN: all ranks slice the model); DxMxS: D replicas of S pipeline "
                                      "stages, each stage sliced over M ranks");
  cmd->add_option("--pipeline", a->pipeline, "split the layers into S pipeline stages on S ranks (1F1B over "
                                             "micro-batches; with more ranks, data-parallel replicas of the pipeline)")
      ->check(cli::positive());
  cmd->add_option("--micro-batches", a->micro_batches, "--pipeline: micro-batches per batch (default 2 per stage, "
                                                       "at least 16 points each)")
      ->check(cli::positive());
  cmd->add_option("--stage-split", a->stage_split, "--pipeline: layers per stage, e.g. 1,3 (input layer, hidden "
                                                   "layers, output layer in order); auto: balanced by estimated cost")
      ->capture_default_str();
  add_choice(cmd, "--parallel", a->parallel, {ParallelMode::model, ParallelMode::data},
             "model: slice the model (with --grid); data: the whole model on every rank, gradients summed by a "
             "dense all-reduce every step (Horovod)");
  cmd->add_option("--slice-weights", a->slice_weights, "relative share of the neurons per model rank, e.g. 1,1,2; "
                                                       "auto: measured (calibrated in the first epoch)");
  cmd->add_option("--calibration-steps", a->calibration_steps, "--slice-weights auto: steps timed to size the slices")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--memory-limit", a->memory_limit_mib,
                  "MiB this rank may take: a model whose weights alone exceed it is refused before it is allocated, "
                  "and --slice-weights auto caps this rank's share of weights and optimizer state by it (0: the "
                  "machine's available memory is the limit)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--calibration-warmup", a->calibration_warmup, "--slice-weights auto: steps before the timed ones")
      ->capture_default_str();
  add_device_option(cmd, a->device);
  add_choice(cmd, "--dp-transport", a->dp_transport,
             {cli::DpTransport::auto_, cli::DpTransport::host, cli::DpTransport::nccl},
             "what sums the data-parallel replicas' gradients: host (the ranks' ZeroMQ/MPI transport), nccl "
             "(NCCL between their GPUs; every replica on --device cuda), auto (nccl when every replica runs on a "
             "GPU and this build has NCCL, else host)");
  a->comm.add_to(cmd);
  add_choice(cmd, "--compress", a->compress, {Compress::link, Compress::off, Compress::auto_},
             "DCT on the network: auto sets the keep fractions online (DCT-DP: per parameter, the fewest entries "
             "carrying a fixed share of the gradient's energy, backing off when the error grows; DCT-MP: per sample, "
             "the fewest activations carrying a fixed share of the L1 mass); off: only what --dp-keep / --mp-keep "
             "and friends ask for; link: auto for the replicas' exchange when the link measured at start-up is slow "
             "enough for it to pay, else off (the log says which; --dp-keep and friends mean off)")
      ->capture_default_str();
  cmd->add_option("--compress-energy", a->compress_energy,
                  fmt::format("--compress auto: the share of each parameter's accumulated gradient energy that DCT-DP's "
                              "messages must carry (default {} under per-row selection, {} with one tau per parameter; "
                              "higher: closer to uncompressed, fewer bytes saved)",
                              kAutoDpEnergyPerRow, kAutoDpEnergyGlobal))
      ->check(cli::in_range(0.01, 0.99));
  cmd->add_option("--dp-keep", a->dp_keep, "DCT-DP: fraction ETA of gradient entries each data-parallel replica "
                                         "sends (|g + residual| >= tau; the rest is fed back); unset: every "
                                         "touched row travels")
      ->check(cli::in_range(1e-9, 1.0));
  cmd->add_option("--dp-reestimate-every", a->dp_reestimate_every, "DCT-DP: steps between estimates of tau (stale "
                                                                   "in between; 1: every step)")
      ->capture_default_str()->check(cli::positive());
  add_choice(cmd, "--dp-tau", a->dp_tau, {TauEstimate::sampled, TauEstimate::exact},
             "DCT-DP: estimate tau from a 10k-entry sample or by exact selection (exact with "
             "--dp-reestimate-every 1: exact top-k every step)");
  add_choice(cmd, "--dp-compress", a->dp_compress,
             {{"auto", std::nullopt}, {"gradients", comm::DpTarget::gradients}, {"updates", comm::DpTarget::updates}},
             "DCT-DP: what replicas threshold and exchange: gradients (the optimizer steps on their sum), "
             "updates (each replica's optimizer steps on its own gradient; the weight changes are averaged), or "
             "auto: updates when a batch touches at least half of the input rows, the softmax is exact and "
             "--dp-keep < 1, else gradients");
  add_choice(cmd, "--dp-select", a->dp_select,
             {{"auto", std::nullopt}, {"global", DpSelect::global}, {"row", DpSelect::row}, {"floor", DpSelect::floor}},
             "DCT-DP: global (the entries above one tau per parameter), row (each touched row sends its own "
             "top ETA fraction; values, not signs) or floor (global, and a touched row with no entry above tau "
             "sends its largest); auto: row when gradients are thresholded, else global");
  cmd->add_option("--dp-keep-input", a->dp_keep_input,
                  "DCT-DP: the keep fraction of the sparse input layer (sparse_dense.*); unset: 2.5 x --dp-keep "
                  "under per-row selection, else --dp-keep")
      ->check(CLI::Validator([](std::string& v) { const auto x = to_number<float>(v);
                                                  return x && *x > 0.0f && *x <= 1.0f ? std::string()
                                                                                      : "expected a fraction in (0, 1]"; },
                             "in (0, 1]"));
  cmd->add_option("--dp-keep-param", a->dp_keep_param,
                  "DCT-DP: PREFIX=ETA, the keep fraction of the parameters whose names start with PREFIX (e.g. "
                  "softmax.=0.2; repeatable, the first match wins; the rest keep --dp-keep)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--dp-warmup-steps", a->dp_warmup_steps, "DCT-DP: the kept fraction falls geometrically from "
                                                           "everything to --dp-keep over the first N steps")
      ->capture_default_str();
  add_choice(cmd, "--dp-momentum-correction", a->dp_momentum_correction, {{"on", true}, {"off", false}},
             "DCT-DP (gradients): each replica accumulates its own momentum velocity and thresholds that (DGC's "
             "momentum correction); the optimizer then steps without momentum of its own");
  cmd->add_option("--dp-explore", a->dp_explore,
                  "DCT-DP: besides the entries the threshold selects, send each other touched entry with this "
                  "probability (Slim-DP's exploration: no coordinate waits behind the large ones indefinitely; its "
                  "bytes count like the rest); 0: off")
      ->capture_default_str()->check(cli::in_range(0.0, 0.5));
  add_choice(cmd, "--dp-local-clip", a->dp_local_clip, {{"on", true}, {"off", false}},
             "DCT-DP (gradients) with --clip-norm C: each replica clips its own gradient to C / sqrt(replicas) "
             "before thresholding (DGC's local clipping) instead of clipping the sum");
  add_choice(cmd, "--on-divergence", a->on_divergence, {OnDivergence::stop, OnDivergence::skip_batch},
             "a training step whose loss (or, with --clip-norm, gradient norm) is NaN or infinite: stop the run "
             "with an error naming the epoch and step, keeping the last good checkpoint; or skip-batch: drop that "
             "batch's update and go on (the epoch line counts skipped_batches; not with replicas or --pipeline)");
  add_choice(cmd, "--overlap", a->overlap, {{"on", true}, {"off", false}},
             "model-parallel steps move the layers above the input while the input boundary's gradient exchange "
             "is in flight (applies without replicas and without --clip-norm), and may compute the input layer in "
             "two halves, the first half's all-gather in flight while the second is computed (--overlap-forward); "
             "the same bits either way");
  add_choice(cmd, "--overlap-forward", a->overlap_forward,
             {{"auto", ForwardSplit::automatic}, {"on", ForwardSplit::always}, {"off", ForwardSplit::never}},
             "with --overlap on and an exact input boundary (--mp-keep 1, f32): split the input layer's forward "
             "pass in two halves always (on), never (off), or where half the batch's input work on the widest "
             "slice reaches 2^20 multiply-adds (auto: below that the extra round of messages costs more than it "
             "hides)");
  cmd->add_option("--mp-keep", a->mp_keep, "DCT-MP: activations each sample keeps per rank's slice at a sliced "
                                           "layer boundary: a fraction (<= 1) or a count (> 1); 1: all")
      ->capture_default_str()
      ->check(cli::in_range(0.0, 1048576.0));  // a count is at most a slice's width (--hidden's largest)
  cmd->add_option("--mp-mass", a->mp_mass, "DCT-MP adaptive k: each sample keeps the fewest of its top --mp-keep "
                                           "activations per slice whose magnitudes cover this fraction of the "
                                           "slice's L1 mass; 1: a fixed k")
      ->capture_default_str();
  add_choice(cmd, "--mp-straight-through", a->mp_straight_through,
             {comm::StraightThrough::off, comm::StraightThrough::input, comm::StraightThrough::all},
             "DCT-MP: backward, this rank's own share of the gradient reaches every unit of its slice, kept or "
             "not (free: it is local), at the input layer's boundary (input) or at every boundary (all); off: "
             "the exact gradient of the masked network");
  add_choice(cmd, "--mp-error-feedback", a->mp_error_feedback, {{"on", true}, {"off", false}},
             "DCT-MP: what a rank's backward message leaves out (gradient shares at dropped positions, value "
             "rounding) is added to its share at the same batch row and position next step (Optimus-CC's lazy "
             "error propagation); on by default at a compressed --pipeline boundary");
  cmd->add_option("--mp-straight-through-steps", a->mp_straight_through_steps,
                  "DCT-MP: the straight-through estimate applies during the first N training steps only; 0: the "
                  "whole run")
      ->capture_default_str();
  cmd->add_option("--mp-warmup-steps", a->mp_warmup_steps, "DCT-MP: the kept fraction falls geometrically from "
                                                           "everything to --mp-keep over the first N steps (a "
                                                           "compressed --pipeline boundary: the first two epochs' "
                                                           "steps unless given)")
      ->capture_default_str();
  add_choice(cmd, "--wire-dtype", a->wire_dtype, {comm::ValueType::f32, comm::ValueType::bf16, comm::ValueType::f16},
             "value type of DCT messages (activations, their gradients, thresholded parameter gradients)");
  add_choice(cmd, "--mp-wire-dtype", a->mp_wire,
             {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
              {"f16", comm::ValueType::f16}, {"i8", comm::ValueType::i8}},
             "DCT-MP: value type of the kept activations and their gradients; i8: one byte each plus a bf16 scale "
             "per sample (activations round to nearest, gradients stochastically); auto: --wire-dtype when given, "
             "else i8 below --mp-keep 1 and f32 at 1");
  add_choice(cmd, "--dp-wire-dtype", a->dp_wire,
             {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
              {"f16", comm::ValueType::f16}, {"sign", comm::ValueType::sign}},
             "DCT-DP: value type of the thresholded entries; sign: one bit each plus one scale per message; auto: "
             "--wire-dtype when given, else below --dp-keep 1 sign for exchanged updates and bf16 for gradients, "
             "f32 at 1");
  cmd->add_flag("--quiet", a->quiet, "no progress output");
  cmd->callback([a, dlrm, cmd] {
    TrainArgs args = *a;
    args.wire_dtype_given = cmd->count("--wire-dtype") > 0;
    args.mp_warmup_given = cmd->count("--mp-warmup-steps") > 0;
    args.mp_error_feedback_given = cmd->count("--mp-error-feedback") > 0;
    args.flag_settings = flag_settings(*cmd, a->comm);
    // IDX data has 10 labels: sampling would only lose accuracy.
    if (args.format == data::DataFormat::idx) args.sampler = layers::Sampler::exact;
    resolve_optimizer(args);
    if (args.model == ModelKind::dlrm || args.format == data::DataFormat::criteo) {
      const int rc = train_dlrm(args, *dlrm, *cmd);
      if (rc != 0) throw CLI::RuntimeError(rc);
      return;
    }
    with_flag_names(kTrainFlags, "", [&] {
      if (!args.layers.empty()) layers::parse_layer_widths(args.layers, "--layers");  // fails before data is read
      parse_grid_and_weights(args);
      if (!args.auto_weights) {
        std::vector<std::string> unused;
        for (const char* flag : {"--calibration-steps", "--calibration-warmup"})
          if (cmd->count(flag) > 0) unused.emplace_back(flag);
        if (!unused.empty())
          fmt::print(stderr, "note: {} only appl(y/ies) to --slice-weights auto: ignored (unless the model group "
                             "mixes GPU and CPU ranks, which calibrates without --slice-weights)\n",
                     fmt::join(unused, ", "));
      }
      if (args.dp_explore > 0.0f && !args.dp_keep && args.compress == Compress::off)
        fmt::print(stderr, "note: --dp-explore only applies to DCT-DP (--dp-keep, or --compress auto): ignored\n");
      if (cmd->count("--bf16-dot") > 0 && args.precision != Dtype::bf16)
        fmt::print(stderr, "note: --bf16-dot only applies to --precision bf16 weights: ignored\n");
      if (cmd->count("--rowwise-momentum") > 0 && args.optimizer != optim::Method::rowwise_adam)
        fmt::print(stderr, "note: --rowwise-momentum only applies to --optimizer rowwise-adam: ignored with --optimizer "
                           "{}\n", optim::to_string(args.optimizer));
      if (args.active_target > 0 && args.k > 0)
        fmt::print(stderr, "note: --active-target only applies to the automatic hash width (--k 0); --k {} is used "
                           "as given\n", args.k);
      args.comm.check();
      FRUGAL_CHECK(args.early_stopping == 0 || (!args.checkpoint.empty() && args.valid_fraction > 0),
                   "--early-stopping needs --checkpoint DIR (the best model is kept in DIR/best) and --valid-fraction "
                   "F (the validation split it watches)");
      const int rc = run_train(args);
      if (rc != 0) throw CLI::RuntimeError(rc);
    });
  });
  return cmd;
}

void add_train_command(CLI::App& app) { add_train_command(app, nullptr); }

void run_train_in_process(const std::vector<std::string>& args, InProcessTrain& data) {
  CLI::App app{"frugal"};
  app.require_subcommand(1);
  add_train_command(app, &data);
  refuse_negative_unsigned(app);
  // CLI11 takes a vector of arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  reversed.emplace_back("train");
  try {
    app.parse(reversed);
  } catch (const CLI::RuntimeError& e) {
    throw Error(fmt::format("frugal train stopped with exit code {}", e.get_exit_code()));
  } catch (const CLI::ParseError& e) {
    // The command line's own words: "--batch: 0 is not positive: expected a count from 1 up".
    throw Error(parse_error_words(e));
  }
}

std::vector<TrainFlag> train_flags() {
  CLI::App app{"frugal"};
  CLI::App* cmd = add_train_command(app, nullptr);
  std::vector<TrainFlag> flags;
  for (const CLI::Option* o : cmd->get_options()) {
    if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
    const std::string name = "--" + o->get_lnames().front();
    flags.push_back({.name = name, .default_value = o->get_default_str(), .takes_value = o->get_items_expected_max() != 0});
  }
  return flags;
}

}  // namespace frugal::cli
