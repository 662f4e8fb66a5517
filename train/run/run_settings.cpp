#include "train/run/run_settings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "comm/codec.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "comm/routed_communicator.h"
#include "core/backend.h"
#include "core/communicator.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/fingerprint.h"
#include "core/data/label_counts_file.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/output.h"
#include "core/parse.h"
#include "core/propensity.h"
#include "core/quote.h"
#include "core/rng.h"
#include "core/say.h"
#include "kernels/bf16_dot.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/early_stopping.h"
#include "train/metrics_log.h"
#include "train/rebalance.h"
#include "train/resume_choice.h"
#include "train/run/calibration.h"
#include "train/run/compression.h"
#include "train/run/data_defaults.h"
#include "train/run/dct_cost.h"
#include "train/run/dlrm_run.h"
#include "train/run/dp_transport.h"
#include "train/run/epoch_report.h"
#include "train/run/infer_choice.h"
#include "train/run/memory_check.h"
#include "train/run/pipeline_run.h"
#include "train/run/rank_threads.h"
#include "train/run/run_notes.h"
#include "train/run/run_settings.h"
#include "train/run/state_estimate.h"
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/train_options.h"
#include "train/run/trained_model.h"
#include "train/trainer.h"

namespace frugal::run {

float effective_lr(const RunArgs& a) {
  if (a.lr) return *a.lr;
  switch (a.method) {
    case optim::Method::sgd: return optim::Sgd{}.lr;
    case optim::Method::adagrad: return optim::Adagrad{}.lr;
    // The XMC network's rate; DLRM's dense MLP shares the rate and overfits at it (synth-ctr, 3
    // epochs: AUC 0.577 at 0.1, 0.596 at 0.03, 0.656 at 0.01), so DLRM keeps Adagrad's.
    case optim::Method::rowwise_adagrad:
      return a.model == ModelKind::dlrm ? optim::Adagrad{}.lr : optim::RowwiseAdagrad{}.lr;
    // DLRM's dense MLP shares the rate: it keeps Adam's.
    case optim::Method::rowwise_adam: return a.model == ModelKind::dlrm ? optim::Adam{}.lr : optim::RowwiseAdam{}.lr;
    case optim::Method::adam:
    case optim::Method::automatic: break;  // resolved before (resolve_optimizer)
  }
  return optim::Adam{}.lr;
}

optim::Method auto_optimizer(const RunArgs& a) {
  if (a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo) return optim::Method::adam;
  if (a.adam_freeze_v_after > 0) return optim::Method::adam;  // a flag of Adam's own: the user means Adam
  return a.sampler == layers::Sampler::lsh ? optim::Method::rowwise_adam : optim::Method::adam;
}

void resolve_optimizer(RunArgs& a) {
  a.method = a.optimizer.value_or(auto_optimizer(a));
  // auto's row-wise Adam keeps row-wise state on the output layer's label rows only.
  if (!a.optimizer && !a.rowwise_input) a.rowwise_input = false;
  if (a.optimizer || a.resume.empty() || a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo)
    return;
  try {
    const train::CheckpointManifest m = train::read_manifest(a.resume, a.accept_unchecked_checkpoint);
    if (m.optimizer.is_object()) a.method = optim::method_from_string(m.optimizer.value("method", "adam"));
    else a.method = optim::Method::adam;  // checkpoints from before the record hold lazy Adam state
    if (m.config.is_object() && m.config.contains("rowwise_layers"))
      a.rowwise_input = m.config.value("rowwise_layers", std::string("all")) == "all";
    a.optimizer_from_checkpoint = true;
  } catch (const std::exception&) {
    // A missing or damaged manifest: the resume itself says so, with the file and what is wrong.
  }
}

Dtype auto_precision(const RunArgs& a, bool cpu_has_bf16, const nlohmann::json& saved) {
  if (saved.contains("labels")) return dtype_from_string(saved.value("precision", std::string("f32")));
  const bool lsh_network = a.model == ModelKind::xmc && a.format == data::DataFormat::xmc &&
                           a.sampler == layers::Sampler::lsh;
  return lsh_network && cpu_has_bf16 && a.dp_compress != comm::DpTarget::updates ? Dtype::bf16 : Dtype::f32;
}

void resolve_precision(RunArgs& a) {
  const nlohmann::json saved = a.precision ? nlohmann::json::object() : resumed_config(a);
  a.precision_from_cpu = !a.precision && !saved.contains("labels");
  if (!a.precision) a.precision = auto_precision(a, kernels::bf16_dot_available(), saved);
  if (a.given.count("--bf16-dot") > 0 && a.precision != Dtype::bf16)
    say_notice("note: --bf16-dot only applies to --precision bf16 weights: ignored\n");
}

std::optional<std::string> precision_reason(const RunArgs& a) {
  if (!a.precision_from_cpu) return std::nullopt;
  return kernels::bf16_dot_available() ? "this CPU has AVX512-BF16"
                                       : "this CPU has no AVX512-BF16 (set --precision on every rank)";
}

optim::Options optimizer_options(const RunArgs& a) {
  FRUGAL_CHECK(a.adam_freeze_v_after == 0 || a.method == optim::Method::adam,
               fmt::format("--adam-freeze-v-after freezes plain Adam's per-element second moment: --optimizer {} "
                           "has {} (use --optimizer adam or drop the flag)", optim::to_string(a.method),
                           a.method == optim::Method::rowwise_adam ? "one per row" : "none"));
  FRUGAL_CHECK(a.adam_freeze_v_after == 0 || a.sparse_updates == optim::SparseUpdates::lazy,
               "--adam-freeze-v-after needs --sparse-updates lazy (a catch-up replays the second moment's decay)");
  return {.method = a.method, .lr = effective_lr(a), .momentum = a.momentum,
          .initial_accumulator = a.initial_accumulator, .weight_decay = a.weight_decay, .updates = a.sparse_updates,
          .freeze_second_moment = a.adam_freeze_v_after, .rowwise_momentum = a.rowwise_momentum,
          .rowwise_input = a.rowwise_input.value_or(true),
          .update_threshold = a.update_threshold};
}

uint64_t total_steps(const RunArgs& a, size_t train_points) {
  uint64_t per_epoch = (train_points + a.batch - 1) / a.batch;
  if (a.max_steps > 0) per_epoch = std::min<uint64_t>(per_epoch, a.max_steps);
  return per_epoch * a.validation.epochs;
}

void parse_grid_and_weights(RunArgs& a) {
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

Grid process_grid(const RunArgs& a, int world) {
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

void check_weights(const RunArgs& a, int model_ranks) {
  FRUGAL_CHECK(a.weights.empty() || static_cast<int>(a.weights.size()) == model_ranks,
               fmt::format("--slice-weights has {} weights but the model is sliced over {} ranks", a.weights.size(),
                           model_ranks));
  FRUGAL_CHECK(a.weights.empty() || std::any_of(a.weights.begin(), a.weights.end(), [](double w) { return w > 0; }),
               fmt::format("--slice-weights {}: at least one rank must hold neurons (a weight > 0)", a.slice_weights));
}

layers::NetworkSpec network_spec(const RunArgs& a, const data::Dataset& train) {
  return {.features = train.num_features, .labels = train.num_labels, .hidden = a.hidden, .layers = a.layers,
          .format = std::string(data::to_string(a.format)), .sampler = std::string(layers::to_string(a.sampler)),
          .hash = std::string(layers::to_string(a.hash)), .k = a.k, .bin_size = a.bin_size,
          .active_target = a.active_target, .tables = a.tables, .bucket = a.bucket, .min_active = a.min_active,
          .max_active = a.max_active.value_or(std::max(lsh::kDefaultActiveBudget, a.min_active)),
          .rebuild_first = a.rebuild_first, .rebuild_max = a.rebuild_max, .rebuild_growth = a.rebuild_growth,
          .negatives = a.negatives, .negatives_uniform = a.negatives_uniform, .logq = a.logq, .seed = a.seed,
          .precision = std::string(dtype_name(a.precision.value_or(Dtype::f32)))};
}

nlohmann::json run_config(const RunArgs& a, const data::Dataset& train) {
  nlohmann::json c = layers::network_config(network_spec(a, train));
  c["lr"] = effective_lr(a);
  if (a.output_start != OutputInit::random) {
    c["output_init"] = std::string(to_string(a.output_start));
    c["centroid_scale"] = a.centroid_scale;
  }
  c["precision"] = std::string(dtype_name(a.precision.value_or(Dtype::f32)));
  c["optimizer"] = optim::to_string(a.method);
  c["sparse_updates"] = optim::to_string(a.sparse_updates);
  if (a.method == optim::Method::sgd) c["momentum"] = a.momentum;
  if (a.method == optim::Method::adagrad || a.method == optim::Method::rowwise_adagrad)
    c["initial_accumulator"] = a.initial_accumulator;
  if (a.adam_freeze_v_after > 0) c["adam_freeze_v_after"] = a.adam_freeze_v_after;
  if (a.method == optim::Method::rowwise_adam) c["rowwise_momentum"] = a.rowwise_momentum;
  if (optim::Optimizer::row_wise_method(a.method))
    c["rowwise_layers"] = a.rowwise_input.value_or(true) ? "all" : "output";
  if (a.update_threshold > 0) c["update_threshold"] = a.update_threshold;
  c["weight_decay"] = a.weight_decay;
  c["lr_schedule"] = optim::to_string(a.schedule);
  c["warmup_steps"] = a.warmup_steps;
  // The steps a decaying schedule spans: resuming with other --epochs would change every rate.
  if (a.schedule != optim::ScheduleKind::constant) c["schedule_steps"] = total_steps(a, a.train_points);
  c["clip_norm"] = a.clip_norm;
  c["dropout"] = a.dropout;
  c["valid_fraction"] = a.validation.fraction;  // changes the training set
  return c;
}

train::TrainerOptions trainer_options(const RunArgs& a, size_t train_points) {
  train::TrainerOptions o;
  o.optimizer = optimizer_options(a);
  o.lr_schedule = {.kind = a.schedule, .warmup_steps = a.warmup_steps,
                   .total_steps = total_steps(a, train_points)};
  o.clip_norm = a.clip_norm;
  o.dropout = {.p = a.dropout, .seed = Rng(a.seed).split(0xd40f).next_u64()};
  o.overlap = a.overlap;
  o.forward_split = a.overlap_forward;
  o.on_divergence = a.on_divergence;
  return o;
}

nlohmann::json resumed_config(const RunArgs& a) {
  if (a.resume.empty()) return nlohmann::json::object();
  try {
    nlohmann::json saved = train::read_manifest(a.resume, a.accept_unchecked_checkpoint).config;
    return saved.is_object() ? saved : nlohmann::json::object();
  } catch (const std::exception&) {
    return nlohmann::json::object();  // the resume itself says what is wrong
  }
}

void apply_data_defaults(RunArgs& a, const data::DatasetStats& stats) {
  const bool xmc = a.format == data::DataFormat::xmc;
  const nlohmann::json saved = resumed_config(a);
  // A checkpoint saved with another table count (before the default became 32) resumes with its own,
  // read as --tables would read it (a manifest's count outside what the flag accepts is refused).
  if (a.given.count("--tables") == 0 && saved.contains("tables")) {
    TrainConfig read;
    try {
      set_option(read, "--tables", saved["tables"].dump());
    } catch (const Error& e) {
      throw Error(fmt::format("--resume {}: the checkpoint's config has tables = {}, which --tables does not accept "
                              "({})", a.resume, saved["tables"].dump(), e.what()));
    }
    a.tables = read.tables;
  }
  const StateEstimate state = estimate_state(a, stats);
  // The whole model against one node: the ranks of one host share its memory (slices on other
  // hosts would leave room: --hidden sets the width).
  const std::optional<MemoryBudget> memory = memory_budget(a.memory_limit_mib);
  const DataDefaultsRequest request{
      .hidden_auto = a.hidden == 0 && a.layers.empty(),
      .centroid_start = a.output_init ? std::optional<bool>(*a.output_init == OutputInit::centroid)
                                             : std::nullopt,
      .lr_auto = !a.lr,
      .infer_auto = !a.infer.mode,
      .network = xmc,
      .rows_per_point = a.sampler == layers::Sampler::exact ? static_cast<double>(stats.labels)
                                                              : std::min(1000.0, static_cast<double>(stats.labels)),
      .state_per_width = state.per_width,
      .state_fixed = state.fixed,
      .memory_bytes = memory ? memory->bytes : 0.0,
      .memory_source = memory ? memory->source : std::string()};
  const DataDefaults d = choose_data_defaults(stats, request);
  const bool resumed = saved.contains("labels");  // a saved run's config (every XMC config names its labels)
  if (request.hidden_auto) a.hidden = saved.contains("hidden") ? saved["hidden"].get<size_t>() : d.hidden;
  if (a.hidden == 0) a.hidden = kDefaultHidden;  // --layers gives the widths
  a.output_start = d.centroid_start ? OutputInit::centroid : OutputInit::random;
  if (!a.output_init && resumed)  // the saved run's own start (none runs on resume)
    a.output_start = saved.value("output_init", std::string("random")) == "centroid" ? OutputInit::centroid
                                                                                   : OutputInit::random;
  if (request.lr_auto) {
    if (saved.contains("lr")) a.lr = saved["lr"].get<float>();
    else if (d.lr) a.lr = d.lr;
  }
  // Inference is not training: a resumed run infers as the data says unless the checkpoint chose.
  const InferMode auto_infer = resumed && saved.contains("infer") ? saved_infer_mode(saved)
                               : d.ensemble                        ? InferMode::ensemble
                                                                   : InferMode::exact;
  a.inference = resolve_infer(a.infer, auto_infer, saved);
  a.data_defaults_line = resumed && !d.summary.empty()
                             ? fmt::format("{} (resumed: the checkpoint's hidden {}, lr {:g})", d.summary, a.hidden,
                                           effective_lr(a))
                             : d.summary;
}

void settle_streamed_inference(RunArgs& a) {
  if (a.inference.mode != InferMode::ensemble) return;
  FRUGAL_CHECK(a.infer.mode != InferMode::ensemble,
               "--infer ensemble: its members (label centroids of the input features, the nearest training points) "
               "are built from the training points in memory, and a streamed set (--stream) is never held whole: "
               "use --infer exact, or --stream off");
  const InferSettings& f = a.infer;
  FRUGAL_CHECK(!(f.weight || f.knn_weight || f.temperature || f.neighbours),
               fmt::format("{} is for --infer ensemble, which a streamed training set (--stream) does not infer with",
                           f.weight ? "--ensemble-weight" : f.knn_weight ? "--ensemble-knn-weight"
                                    : f.temperature                      ? "--ensemble-temperature"
                                                                         : "--ensemble-neighbours"));
  a.inference.mode = InferMode::exact;
  a.data_defaults_line += std::string(a.data_defaults_line.empty() ? "" : "; ") +
                          "--infer exact: the ensemble the data would choose is built from the training points in "
                          "memory, and this set is streamed (--stream off holds it)";
}

void check_weights_fit(const RunArgs& a, const data::Dataset& train, const Grid& grid) {
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

nlohmann::json setting_value(const std::string& text) {
  if (text == "on" || text == "off") return text == "on";
  if (const auto i = to_number<int64_t>(text)) return *i;
  if (const auto d = to_number<double>(text); d && std::isfinite(*d)) return *d;
  return text;
}

void prepare(RunArgs& a) {
  for (const auto& [key, text] : agreed_settings(a)) a.flag_settings[key] = setting_value(text);
  // IDX data has 10 labels: sampling would only lose accuracy.
  if (a.format == data::DataFormat::idx) a.sampler = layers::Sampler::exact;
  resolve_optimizer(a);
  resolve_precision(a);
  if (a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo) return;
  if (!a.layers.empty()) layers::parse_layer_widths(a.layers, "--layers");
  parse_grid_and_weights(a);
  if (!a.auto_weights) {
    std::vector<std::string> unused;
    for (const char* flag : {"--calibration-steps", "--calibration-warmup"})
      if (a.given.count(flag) > 0) unused.emplace_back(flag);
    if (!unused.empty())
      say_notice("note: {} only appl(y/ies) to --slice-weights auto: ignored (unless the model group mixes GPU and "
                 "CPU ranks, which calibrates without --slice-weights)\n",
                 fmt::join(unused, ", "));
  }
  if (a.dp_explore > 0.0f && !a.dp_keep && a.compress == Compress::off)
    say_notice("note: --dp-explore only applies to DCT-DP (--dp-keep, or --compress auto): ignored\n");
  if (a.given.count("--rowwise-momentum") > 0 && a.method != optim::Method::rowwise_adam)
    say_notice("note: --rowwise-momentum only applies to --optimizer rowwise-adam: ignored with --optimizer {}\n",
               optim::to_string(a.method));
  if (a.active_target > 0 && a.k > 0)
    say_notice("note: --active-target only applies to the automatic hash width (--k 0); --k {} is used as given\n",
               a.k);
}

}  // namespace frugal::run
