// The run itself (train/run/run.h): the settings resolved, the ranks joined, the network built
// and trained epoch by epoch, with its records, checkpoints and notes. The XMC network and the MLP
// train here; the pipeline (train/run/pipeline_run.h) and DLRM (train/run/dlrm_run.h) are handed
// their settings as resolved here.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <array>
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
#include "core/data/packed_file.h"
#include "core/data/point_checks.h"
#include "core/data/point_stream.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/flag_names.h"
#include "core/warnings.h"
#include "kernels/bf16_dot.h"
#include "core/output.h"
#include "core/parse.h"
#include "core/propensity.h"
#include "core/quote.h"
#include "core/rng.h"
#include "core/say.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/best_epoch.h"
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
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/train_options.h"
#include "train/run/trained_model.h"
#include "train/run/trainer_support.h"
#include "train/run/epoch_parts.h"
#include "train/run/validation_plan.h"
#include "train/trainer.h"

namespace frugal::run {
namespace {

// A FRUGAL_* setting as the caller gave it (TrainConfig::join; the command line's --rank and friends).
std::optional<std::string> join_setting(const RunArgs& a, std::string_view variable) {
  const auto it = a.join.settings.find(variable);
  return it == a.join.settings.end() ? std::nullopt : std::optional<std::string>(it->second.value);
}

comm::InitOptions join_options(const RunArgs& a, comm::RunConfig run_config) {
  comm::InitOptions o = a.join;
  o.run_config = std::move(run_config);
  return o;
}

comm::RunConfig to_run_config(const nlohmann::json& config) {
  comm::RunConfig out;
  for (const auto& [key, value] : config.items()) out[key] = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

// The run's compute backend: the device --device names (core/device.h), where the model is placed
// once built (Model::set_backend; the trainer places its optimizer with it).
Backend& choose_device(const std::string& device, int threads) {
  Backend& backend = resolve_device(device);
  backend.set_num_threads(threads_for_rank(threads));
  return backend;
}

// --resume: the newest intact checkpoint of the folder loaded into the model and trainer (the
// early-stopping state too), said on rank 0.
struct Resumed {
  train::CheckpointInfo info;
  std::vector<train::SkippedCheckpoint> skipped;  // damaged newer ones passed over
  nlohmann::json run_state;  // a checkpoint saved within an epoch says how far (--checkpoint-every)
};

Resumed resume_run(const RunArgs& a, comm::Communicator& world, Model& model, train::Trainer& trainer,
                   const nlohmann::json& resume_config, train::BestEpoch& best,
                   const nlohmann::json* data_identity) {
  const int rank = world.rank();
  // The newest checkpoint whose files are all intact, the same on every rank (train/resume_choice.h);
  // a damaged one is passed over out loud, even with --quiet.
  const train::CheckpointChoice choice = train::choose_resume_checkpoint(a.resume, a.accept_unchecked_checkpoint, world);
  const train::CheckpointManifest info = train::load_checkpoint(a.resume, choice.manifest, model, trainer, resume_config);
  if (rank == 0 && !choice.skipped.empty())
    say_notice("--resume {}: resuming from the older checkpoint {} (epoch {}, step {})\n", a.resume,
               choice.manifest_file, info.epoch, info.step);
  best.resume(info.run_state);
  const size_t epoch_step = train::epoch_step_of(info.run_state);
  if (rank == 0 && !a.quiet && info.config.contains("train_data") && data_identity &&
      info.config["train_data"] != *data_identity)
    say_notice("note: --resume {}: the checkpoint trained on other data ({}); --train {} is {}\n", a.resume,
               info.config["train_data"].dump(), a.train, data_identity->dump());
  if (!a.quiet)
    say("resumed from {} at epoch {}, step {}{} (saved by {} rank(s) in {} model slice(s))\n", a.resume,
        info.epoch, info.step, epoch_step > 0 ? fmt::format(", {} steps into epoch {}", epoch_step, info.epoch + 1) : "",
        info.world_size, info.model_slices);
  if (!a.quiet && trainer.has_feedback_state() && !info.dct_residuals_restored)
    say("DCT-DP residuals start empty: the checkpoint has none for this grid (saved {})\n",
               info.has_dct_residuals ? "on another grid" : "without --dp-keep");
  return {.info = info, .skipped = choice.skipped, .run_state = info.run_state};
}

// The data a run trains on: the training and test sets (files, or in memory from another program),
// and the validation set: --valid's file, or the seeded share of the training set held back
// (train/run/validation_plan.h; the same on every rank).
struct RunData {
  TrainInputs inputs;
  std::optional<data::Split> held_out;
  std::optional<data::Dataset> valid_file;
  bool in_memory = false;  // given in memory (run::train's overload), not read from files
  double parse_seconds = 0.0;
  size_t file_points = 0;  // the training file's points (the validation share included)
  // --stream (choose_streaming, train/run/memory_check.h): the training set is read from its packed
  // file block by block while it trains (core/data/point_stream.h), never whole. inputs.train then
  // holds its first block only, for the choices made from a sample of the points (compression);
  // `streamed` stands for the whole set (its size, statistics and label counts, from the file's
  // header), and the validation share is held back from seeded blocks (`stream_valid`).
  std::unique_ptr<data::PackedReader> packed;
  std::optional<data::StreamedSet> streamed;
  std::optional<data::PointHeldBack> stream_valid;
  const data::Dataset& train() const { return held_out ? held_out->train : inputs.train; }
  const data::Dataset* valid() const {
    return held_out ? &held_out->test : stream_valid ? &stream_valid->points : valid_file ? &*valid_file : nullptr;
  }
  size_t train_points() const { return streamed ? streamed->points : train().size(); }
  // Streamed: the validation share's points (indices in the file), which every epoch leaves out.
  std::span<const uint64_t> held_back() const {
    return stream_valid ? std::span<const uint64_t>(stream_valid->indices) : std::span<const uint64_t>();
  }
  data::DatasetStats train_stats() const { return streamed ? streamed->stats : data::compute_stats(train()); }
  // The bytes of the points of a packed file, as a run holding them would take.
  static double held_bytes(const data::PackedHeader& h) {
    return 16.0 * static_cast<double>(h.points + 1) + 8.0 * static_cast<double>(h.feature_nnz) +
           4.0 * static_cast<double>(h.label_nnz);
  }
};

RunData load_run_data(RunArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  RunData d;
  d.in_memory = a.train_data.has_value();
  // A packed points file streams by the one rule of every trainer (train/run/memory_check.h); the
  // pipeline holds its set (a --stream on is refused by check_trainer_support).
  FRUGAL_CHECK(!(a.stream.value_or(false) && d.in_memory),
               "--stream on: the training set is given in memory; streaming reads a packed file (frugal data pack)");
  FRUGAL_CHECK(!(a.stream.value_or(false) && a.format == data::DataFormat::idx),
               "--stream on: --format idx sets are read whole (they are a few MB); streaming reads a packed XMC file");
  if (!d.in_memory && a.format != data::DataFormat::idx) {
    std::unique_ptr<data::PackedReader> packed;
    if (data::is_packed_file(a.train)) packed = std::make_unique<data::PackedReader>(a.train);
    const bool points = packed && packed->header().kind == data::PackedKind::points;
    if (choose_streaming(a.pipeline > 0 ? std::optional<bool>(false) : a.stream, a.train, points,
                         points ? RunData::held_bytes(packed->header()) : 0.0, a.memory_limit_mib))
      d.packed = std::move(packed);
  }
  if (d.packed) {
    // The first block: what the choices made from a sample of the points read (and the dimensions).
    d.inputs = {.train = data::load_packed_points(a.train, 0, 1), .test = open_input(a.format, a.test)};
    data::check_points(d.inputs.train);
    data::check_points(d.inputs.test, {.training = false});
  } else {
    d.inputs = d.in_memory ? TrainInputs{.train = std::move(*a.train_data), .test = std::move(*a.test_data)}
                           : load_train_test(a.format, a.train, a.test);
  }
  const size_t file_points = d.packed ? d.packed->header().points : d.inputs.train.size();
  const data::Dataset& test = d.inputs.test;
  FRUGAL_CHECK(test.num_features == d.inputs.train.num_features && test.num_labels == d.inputs.train.num_labels,
               fmt::format("{} has {} features and {} labels, but {} has {} and {}", a.test, test.num_features,
                           test.num_labels, a.train, d.inputs.train.num_features, d.inputs.train.num_labels));
  const nlohmann::json saved = resumed_config(a);
  a.validation = plan_validation(resumed_valid_fraction(a.valid_fraction, !a.valid.empty(), saved), !a.valid.empty(), a.early_stopping,
                                 file_points, a.epochs);
  a.schedule = a.lr_schedule.value_or(resumed_schedule(saved).value_or(auto_schedule(a.validation)));
  if (!a.valid.empty()) {
    d.valid_file = open_input(a.format, a.valid);
    if (a.format == data::DataFormat::idx) d.valid_file->num_labels = d.inputs.train.num_labels;
    FRUGAL_CHECK(d.valid_file->num_features == d.inputs.train.num_features &&
                     d.valid_file->num_labels == d.inputs.train.num_labels,
                 fmt::format("--valid {} has {} features and {} labels, but {} has {} and {}", a.valid,
                             d.valid_file->num_features, d.valid_file->num_labels, a.train,
                             d.inputs.train.num_features, d.inputs.train.num_labels));
    data::check_points(*d.valid_file, {.training = false});
    FRUGAL_CHECK(d.valid_file->size() > 0, fmt::format("--valid {}: the file holds no points to score", a.valid));
  }
  if (a.validation.fraction > 0 && d.packed) {
    d.stream_valid = hold_back(*d.packed, a.validation.fraction, a.seed);
    FRUGAL_CHECK(d.stream_valid->points.size() > 0,
                 fmt::format("--valid-fraction {:g} holds back none of the {} training points: give a larger share, "
                             "or 0 for no validation", a.validation.fraction, file_points));
  } else if (a.validation.fraction > 0) {
    d.held_out = hold_back(d.inputs.train, a.validation.fraction, a.seed);
    FRUGAL_CHECK(d.held_out->test.size() > 0,
                 fmt::format("--valid-fraction {:g} holds back none of the {} training points{}: give a larger share, "
                             "or 0 for no validation", a.validation.fraction, d.inputs.train.size(),
                             d.held_out->wanted_test > 0 ? " (every label of the points it would take has no other)" : ""));
    // The split holds both parts: the whole set's points go (a second copy of the data, in the way
    // of every set close to the memory's size); its dimensions, name and hash stay.
    d.inputs.train.points = SparseBatch{};
  }
  d.file_points = file_points;
  if (d.packed) d.streamed = data::streamed_set(*d.packed, d.stream_valid ? d.stream_valid->points : data::Dataset{});
  a.train_points = d.train_points();
  d.parse_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

// Replica `replica` of `replicas`' share of the validation set: every replicas-th point from its
// index (the shares are disjoint and cover the set).
data::Dataset replica_share(const data::Dataset& valid, size_t replica, size_t replicas) {
  std::vector<uint32_t> rows;
  for (size_t i = replica; i < valid.size(); i += replicas) rows.push_back(static_cast<uint32_t>(i));
  data::Dataset share;
  share.num_features = valid.num_features;
  share.num_labels = valid.num_labels;
  share.source = valid.source;
  valid.gather(rows, share.points);
  return share;
}

// The log's line on the validation set: what is scored, how the best epoch is kept, or why none is.
// `returns_model`: the trainer hands its model back (the pipeline keeps its best in CHECKPOINT/best only).
std::string validation_line(const RunArgs& a, const data::Dataset* valid, size_t train_points,
                            bool returns_model = true) {
  if (valid == nullptr) return a.validation.line.empty() ? "validation: off (--valid-fraction 0)" : a.validation.line;
  const std::string what = a.validation.file
                               ? fmt::format("validation: {} points of {}", valid->size(), a.valid)
                               : fmt::format("validation: {} points ({:.1f}%) held back from the training set, {} train",
                                             valid->size(), 100.0 * a.validation.fraction, train_points);
  const std::string kept = returns_model ? fmt::format("the best epoch's model is returned{}",
                                                       a.checkpoint.empty() ? "" : fmt::format(" and kept in {}/best", a.checkpoint))
                          : a.checkpoint.empty() ? std::string("the best epoch is recorded (no --checkpoint to keep it in)")
                                                 : fmt::format("the best epoch's model is kept in {}/best", a.checkpoint);
  return fmt::format("{}; {}{}", what, kept,
                     a.validation.patience > 0
                         ? fmt::format(", early stopping after {} epochs without a better P@1 + P@5 (at most {} epoch{}{})",
                                       a.validation.patience, a.validation.epochs, a.validation.epochs == 1 ? "" : "s",
                                       !a.lr_schedule && a.schedule == optim::ScheduleKind::cosine
                                           ? "; --lr-schedule auto: a cosine rate over them"
                                           : "")
                         : "");
}

// What every rank must agree on before training starts (compared at rendezvous; also the metrics
// log's start line "config"): what run_config resolves (the network, the optimizer), the DCT settings
// as resolved, every other flag as given (flag_settings: a setting already recorded keeps its resolved
// value), and the data's fingerprints.
nlohmann::json rendezvous_config(const RunArgs& a, const TrainInputs& inputs, const data::Dataset& train,
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
  record_infer(a.inference, config);
  if (const auto why = precision_reason(a)) config["precision_auto"] = *why;
  {
    // --max-message-bytes or its variable: a rank with another limit refuses the others' messages.
    const char* env = std::getenv(std::string(comm::env::kMaxMessageBytes).c_str());
    config["max_message_bytes"] = join_setting(a, comm::env::kMaxMessageBytes).value_or(env != nullptr ? env : "default");
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
void run_pipeline_train(RunArgs& a, comm::Communicator& world, const RunData& data, Backend& backend,
                        const nlohmann::json& config, const Grid& grid, uint64_t restarts, RunResult& result) {
  const data::Dataset& train = data.train();
  const int rank = world.rank();
  check_weights_fit(a, train, grid);  // --memory-limit, as every trainer checks it
  if (a.compress == Compress::link) a.compress = Compress::off;  // stage boundaries and replicas as given
  PipelineRun r;
  r.train = &train;
  r.test = &data.inputs.test;
  r.valid = data.valid();
  r.patience = a.validation.patience;
  r.spec = network_spec(a, train);
  r.backend = &backend;
  r.stages = grid.stages;
  r.replicas = grid.data;
  r.slices = grid.model;
  r.stage_split = parse_stage_split(a.stage_split);
  const train::TrainerOptions trainer = trainer_options(a, train.size());
  r.options.micro_batches = a.micro_batches > 0 ? a.micro_batches : default_micro_batches(grid.stages, a.batch);
  r.options.boundary = mp_compression(a);
  // A compressed boundary trains as the uncompressed one only after a warm-up (bench/REPORT.md,
  // Cluster: --mp-keep 0.1 lost 7.3 points of P@1 without one; with the kept fraction falling over
  // the first epoch 1.2 to 2.1, over the first two epochs none), and error feedback kept the seeds
  // closer: those are its defaults; turned off by hand, the log says so.
  const bool compressed = r.options.boundary.keep < 1.0 || r.options.boundary.mass < 1.0;
  const size_t replicas = static_cast<size_t>(grid.data);
  const size_t epoch_steps = std::max<size_t>(1, (train.size() + a.batch * replicas - 1) / (a.batch * replicas));
  if (compressed && !a.mp_warmup_steps.has_value()) r.options.boundary.warmup_steps = 2 * epoch_steps;
  if (compressed && !a.mp_error_feedback.has_value()) r.options.boundary.error_feedback = true;
  if (compressed && rank == 0 && !a.quiet && ((a.mp_warmup_steps.has_value() && a.mp_warmup_steps.value_or(0) == 0) ||
                                              (a.mp_error_feedback.has_value() && !a.mp_error_feedback.value_or(false))))
    say_notice("note: a compressed pipeline boundary without {} lost P@1 in bench/pipeline (up to 7 points; "
                       "the defaults: a warm-up over the first two epochs and error feedback)\n",
               a.mp_warmup_steps.has_value() && a.mp_warmup_steps.value_or(0) == 0 ? "a warm-up" : "error feedback");
  r.options.dp = dp_compression(a);
  r.options.optimizer = trainer.optimizer;
  r.options.lr_schedule = trainer.lr_schedule;
  r.options.clip_norm = trainer.clip_norm;
  r.options.dropout = trainer.dropout;
  r.options.on_divergence = trainer.on_divergence;
  r.batch = a.batch;
  r.epochs = a.validation.epochs;
  r.eval_batch = a.eval_batch;
  r.max_steps = a.max_steps;
  r.seed = a.seed;
  r.quiet = a.quiet || rank != 0;
  r.centroid_init = a.output_start == OutputInit::centroid;
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
  record_infer(a.inference, r.checkpoint_config);
  r.restarts = restarts;
  if (rank == 0 && !r.quiet && !a.data_defaults_line.empty()) say("{}\n", a.data_defaults_line);
  const Scoring scoring(a, train);
  r.eval = scoring.options;
  r.before_checkpoint = [&scoring, rank](const std::string& dir) { scoring.keep_beside(dir, rank); };
  r.on_epoch = [&a, &result, &world](const nlohmann::json& line) {
    return report_epoch(line, a.callbacks, result, &world);
  };
  if (rank == 0 && !r.quiet) say("{}\n", validation_line(a, data.valid(), train.size(), /*returns_model=*/false));
  result.model_epoch = run_pipeline(world, std::move(r));
}

RunResult run_train(RunArgs a) {
  // What a pipeline does not implement, refused by name before the data is read.
  if (a.pipeline > 0) check_trainer_support(a, TrainerKind::pipeline);
  RunResult result;
  auto held = std::make_shared<TrainedModel>();  // what the result keeps of this run
  Backend& backend = choose_device(a.device, a.threads);
  const RunData data = load_run_data(a);
  const data::Dataset& test = data.inputs.test;
  // Streamed: the first block of the training set (RunData), read by the choices made from a sample.
  const data::Dataset& train = data.train();
  const data::Dataset* valid = data.valid();
  const TrainInputs& inputs = data.inputs;
  const bool in_memory = data.in_memory;
  const double parse_seconds = data.parse_seconds;
  apply_data_defaults(a, data.train_stats());
  if (data.streamed) settle_streamed_inference(a);
  // --dp-keep with --dp-compress auto: what it chose
  std::optional<DpTargetChoice> dp_auto = settle_compression(a, train, backend);
  // Every rank reads its own copy of the data; ranks that disagree on a setting refuse to start.
  nlohmann::json config = rendezvous_config(a, inputs, train, in_memory);
  // Streamed, each replica reads its own blocks: the ranks must all stream, and cut the same blocks.
  config["stream"] = data.streamed.has_value();
  if (data.streamed) config["train_blocks"] = data.packed->header().block_list();
  held->world = comm::init(join_options(a, to_run_config(config)));
  auto& world = held->world;
  const int rank = world->rank();
  const uint64_t restarts = restart_count();
  if (rank == 0 && join_setting(a, comm::env::kTransportMap) && world->backend() != "mpi" && world->backend() != "mpi+zmq")
    say_notice("note: --transport-map applies to jobs mpirun starts (the ranks also open the ZeroMQ mesh); this "
                       "run's ranks use {} alone: ignored\n", world->backend());
  // Dense products in bf16 where the device has them (the weights stay f32; autocast's split), for
  // this run only: the backend is the process's, and a later run in it (Python, the C++ API, a test)
  // starts from f32 products again.
  struct RestoreProducts {
    Backend& backend;
    ~RestoreProducts() { backend.set_bf16_products(false); }
  } restore_products{backend};
  const bool bf16_products = backend.set_bf16_products(a.precision == Dtype::bf16) && a.precision == Dtype::bf16;
  if (rank == 0) note_precision(a, bf16_products);  // every trainer's, the pipeline's too
  const Grid grid = process_grid(a, world->size());
  if (a.pipeline > 0) {
    run_pipeline_train(a, *world, data, backend, config, grid, restarts, result);
    return result;
  }
  check_weights(a, grid.model);
  held->model_group = world->split(rank / grid.model, rank);
  auto& model_group = held->model_group;
  // A model group that mixes devices (a GPU rank next to CPU ranks) sizes its slices by measured
  // speed unless --slice-weights says otherwise: equal slices would keep the GPU waiting on the CPUs.
  if (a.slice_weights.empty() && a.parallel == ParallelMode::model &&
      group_mixes_devices(model_group.get(), device_name(backend))) {
    a.auto_weights = true;
    if (rank == 0)
      say("the model group mixes GPU and CPU ranks: --slice-weights auto (shares from measured speed; "
                 "--slice-weights 1,1,.. keeps equal slices)\n");
  }
  if (rank != 0) a.quiet = true;  // one voice: rank 0 prints, every rank logs its metrics
  if (!a.quiet && !a.data_defaults_line.empty()) say("{}\n", a.data_defaults_line);
  note_straight_through(a, grid.model);
  note_forward_split(a, grid.model);
  note_momentum_correction(a, grid.data);
  note_cuda_alone(a, backend, grid.model);
  held->data_group = data_parallel_group(a.dp_transport, backend, world->split(rank % grid.model, rank),
                                             comm::comm_timeout_seconds(a.join), !a.quiet);
  auto& data_group = held->data_group;
  // The replicas' link rate: measured once, before any epoch counts traffic (apps/dct_cost.h).
  std::optional<double> link_rate;
  // --compress link: what it measured and chose
  const std::optional<CompressChoice> compress_choice = choose_link_compression(a, train, backend, data_group.get(),
                                                                                link_rate, dp_auto);
  note_compress(a, grid);
  if (!a.quiet && !data.streamed)
    say("read {} train and {} test points ({} features, {} labels, {:.1f} nnz/point) in {:.1f} s\n",
               data.file_points, test.size(), train.num_features, train.num_labels, train.average_nonzeros(),
               parse_seconds);
  if (!a.quiet && data.streamed)
    say("streaming {} from disk: {} points in {} blocks ({} features, {} labels, {:.1f} nnz/point; {:.0f} MiB in "
        "memory if held{}); each of {} replica(s) reads its share of the blocks an epoch, {} at a time, shuffled "
        "within them (not over the whole file); read {} test points in {:.1f} s\n",
        a.train, data.packed->header().points, data.packed->header().blocks(), train.num_features, train.num_labels,
        data.streamed->stats.average_nonzeros, RunData::held_bytes(data.packed->header()) / 1048576.0,
        a.stream.value_or(false) ? "; --stream on" : ", more than half of what this run may use: --stream auto",
        grid.data, data::kStreamWindowBlocks, test.size(), parse_seconds);
  if (!a.quiet) say("{}\n", validation_line(a, valid, data.train_points()));
  if (!a.quiet && dp_auto && data_group)
    say("DCT-DP thresholds {} (--dp-compress auto: a batch touches {:.0f}% of the input rows, {} sampler)\n",
               dp_auto->target == comm::DpTarget::updates ? "the replicas' optimizer updates" : "gradients",
               100.0 * dp_auto->input_rows_touched, layers::to_string(a.sampler));

  check_weights_fit(a, train, grid);
  Model& model = held->model;
  const auto build = [&](Model& m, const std::vector<double>& weights) {
    layers::build_network(m, network_spec(a, train), Placement::sliced(*model_group, weights));
    m.set_backend(&backend);  // the parameters move into the device's memory (core/layer.h)
  };
  build(model, a.weights);
  train::TrainerOptions options = trainer_options(a, data.train_points());
  options.parallel = {.model = model_group.get(), .data = data_group.get(),
                      .dense_gradients = a.parallel == ParallelMode::data};
  options.mp = mp_compression(a);
  options.dp = dp_compression(a);
  // In an optional so that --slice-weights auto can remake it in place (the same object).
  std::optional<train::Trainer>& trainer_slot = held->trainer;
  train::Trainer& trainer = trainer_slot.emplace(model, options);
  note_optimizer(a, trainer, rank);
  // The best epoch on the validation set: kept in CHECKPOINT/best (or in memory) and returned.
  train::BestEpoch best(a.validation.patience,
                        a.checkpoint.empty() ? std::string() : (std::filesystem::path(a.checkpoint) / "best").string(),
                        a.resume.empty() ? std::string() : (std::filesystem::path(a.resume) / "best").string());
  // What a checkpoint must agree with to be resumed (the grid may change: checkpoints reslice).
  const nlohmann::json resume_config = run_config(a, train);
  // What checkpoints record: the same, how the weights are stored and how the run infers (predict /
  // evaluate infer the same way by default; a resumed run may infer otherwise, and its stored values
  // convert to another --precision, so --resume compares neither: train::require_same_settings).
  nlohmann::json checkpoint_config = resume_config;
  record_infer(a.inference, checkpoint_config);
  // The training data's identity (the text's whole-file hash, which its packed form shares), which
  // --resume reports rather than compares (a checkpoint may resume on another file of the same data).
  if (config.contains("train_fingerprint")) checkpoint_config["train_data"] = config["train_fingerprint"];
  if (data.streamed) checkpoint_config["train_data"] = {{"hash", config.value("train_fingerprint", "")},
                                                        {"blocks", config["train_blocks"]}};
  std::optional<train::CheckpointInfo> resumed_from;
  std::vector<train::SkippedCheckpoint> resume_skipped;
  nlohmann::json resumed_state;  // the checkpoint's run state (how far into an epoch it was saved)
  if (!a.resume.empty()) {
    Resumed r = resume_run(a, *world, model, trainer, resume_config, best,
                           checkpoint_config.contains("train_data") ? &checkpoint_config["train_data"] : nullptr);
    resumed_from = r.info;
    resume_skipped = std::move(r.skipped);
    resumed_state = std::move(r.run_state);
  }
  if (!a.quiet)
    say("model: {} ({} parameters on this rank), device {}, {} threads, {} rank(s) as a {}x{} grid ({})\n",
               model.describe(), model.num_parameters(), device_name(backend), backend.num_threads(), world->size(),
               grid.data, grid.model, world->backend());
  held->scoring = std::make_unique<Scoring>(a, train, valid, data.streamed ? &data.streamed->label_counts : nullptr);
  Scoring& scoring = *held->scoring;
  // Data-parallel replicas each score their share of the validation set and sum the counts over the
  // replicas: the figures of one scorer in 1/D of its time. (The ensemble's blend choice compares
  // blends point by point: every replica scores the whole split for it.)
  const std::optional<data::Dataset> valid_share =
      valid != nullptr && data_group && data_group->size() > 1 && !scoring.choice
          ? std::optional<data::Dataset>(replica_share(*valid, static_cast<size_t>(data_group->rank()),
                                                       static_cast<size_t>(data_group->size())))
          : std::nullopt;
  const train::EvalOptions& eval_options = scoring.options;
  const std::string metrics_file = train::rank_metrics_path(a.metrics, rank);
  train::MetricsLog log = metrics_file.empty() ? train::MetricsLog() : train::MetricsLog(metrics_file, !a.resume.empty());
  log.write({{"event", "start"}, {"config", config}, {"train", a.train}, {"test", a.test},
             {"train_points", data.train_points()}, {"stream", data.streamed.has_value()},
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
    const train::EvalResult ev = trainer.evaluate(test, eval_options);
    if (!a.quiet) say("resumed model: P@1 {:.4f}, P@3 {:.4f}, P@5 {:.4f}\n", ev.p(1), ev.p(3), ev.p(5));
    log.write({{"event", "resume"}, {"epoch", resumed_from->epoch}, {"step", resumed_from->step},
               {"saved_world_size", resumed_from->world_size}, {"saved_model_slices", resumed_from->model_slices},
               {"dct_residuals_restored", resumed_from->dct_residuals_restored},
               {"folder", resumed_from->folder}, {"skipped_checkpoints", skipped_json(resume_skipped)},
               {"p@1", ev.p(1)}, {"p@3", ev.p(3)}, {"p@5", ev.p(5)}});
  }
  if (!resumed_from && a.output_start == OutputInit::centroid) {
    const auto t = std::chrono::steady_clock::now();
    if (data.streamed)  // every block once, in file order (every rank: the model group's ranks pass the same)
      trainer.init_output_from_centroids(data::file_order_batches(*data.packed, data.held_back(), a.eval_batch),
                                         a.centroid_scale);
    else
      trainer.init_output_from_centroids(train, a.centroid_scale, a.eval_batch);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (!a.quiet) say("output rows set to label centroids in hidden space in {:.1f} s\n", seconds);
    // Part of the time a run takes to reach a score (bench/single_node/time_to_target.py counts it).
    log.write({{"event", "output_init"}, {"init", "centroid"}, {"seconds", seconds}});
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
  bool calibrate = a.auto_weights && grid.model > 1 && !data.streamed;
  if (a.auto_weights && grid.model > 1 && data.streamed && !a.quiet)
    say_notice("note: --slice-weights auto calibrates on the held training set; a streamed one (--stream) keeps the "
               "slices as they are (--slice-weights W,W,.. sets them)\n");
  RunGroups groups{.world = world.get(), .model = model_group, .retired = held->retired};
  if (a.auto_weights && grid.model == 1 && !a.quiet)
    say("--slice-weights auto: the model is not sliced (1 model rank), nothing to calibrate\n");
  bool stop_asked = false;  // RunCallbacks::on_epoch returned false
  size_t last_blend = SIZE_MAX;  // the ensemble blend the previous epoch chose (said when it changes)
  // One scoring of the validation set (collective: every rank takes rank 0's figures). The
  // ensemble's blend chosen on it is the one the test set is scored with (and checkpoints record).
  struct ValidScores {
    double p1 = -1.0, p5 = -1.0;  // -1: no validation set
    size_t points = 0;            // scored over the group
    double seconds = 0.0;
    std::optional<BlendChosen> blend;
  };
  const auto score_valid = [&]() {
    ValidScores out;
    if (valid == nullptr) return out;
    out.points = valid->size();
    const auto start = std::chrono::steady_clock::now();
    if (scoring.choice) {
      out.blend = choose_blend(scoring, trainer, *groups.world);
      out.p1 = out.blend->chosen.p1;
      out.p5 = out.blend->chosen.p5;
      a.inference.ensemble = out.blend->chosen.options;
      record_infer(a.inference, checkpoint_config);
      if (!a.quiet && out.blend->chosen.index != last_blend) say("{}\n", describe_blend(*out.blend));
      last_blend = out.blend->chosen.index;
    } else {
      train::EvalOptions valid_eval = eval_options;
      valid_eval.k = {1, 5};
      valid_eval.propensities = nullptr;
      const train::EvalResult v = trainer.evaluate(valid_share ? *valid_share : *valid, valid_eval);
      // P@k summed over the points (each replica's share), then the mean over every point.
      const double n = static_cast<double>(v.samples);
      std::array<float, 3> sums = {static_cast<float>(n > 0 ? v.p(1) * n : 0.0),
                                   static_cast<float>(n > 0 ? v.p(5) * n : 0.0), static_cast<float>(n)};
      if (valid_share) data_group->all_reduce(std::span<float>(sums), comm::ReduceOp::sum).wait();
      // Saving the best model is collective: every rank must take rank 0's decision.
      std::array<float, 2> said = {sums[2] > 0 ? sums[0] / sums[2] : 0.0f, sums[2] > 0 ? sums[1] / sums[2] : 0.0f};
      if (groups.world->size() > 1) groups.world->broadcast(std::span<float>(said), 0).wait();
      out.p1 = said[0];
      out.p5 = said[1];
      out.points = static_cast<size_t>(sums[2]);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  };
  // The best model so far, kept (collective): its own checkpoint in CHECKPOINT/best, or in memory.
  const auto keep_best = [&](const std::string& best_dir) {
    scoring.keep_beside(best_dir, rank);  // first: the manifest records the files beside it
    train::save_checkpoint(best_dir, model, trainer, checkpoint_config, best.run_state());
  };
  // Long epochs are scored within too, every `valid_every` steps (train/run/validation_plan.h).
  // A streamed epoch (RunData): its stream, made at the epoch's start (its blocks in the epoch's order,
  // this replica's share of them), which the epoch's parts continue; a resumed one skips what was
  // trained. The streamed set's label counts stand for the whole set's (the stream never holds it).
  std::unique_ptr<data::PointStream> stream;
  std::vector<uint32_t> stream_label_counts;
  if (data.streamed)
    for (const uint64_t c : data.streamed->label_counts.per_label) stream_label_counts.push_back(static_cast<uint32_t>(c));
  const auto open_stream = [&](uint64_t seed) {
    stream.reset();  // its reader thread stops first
    stream = std::make_unique<data::PointStream>(
        *data.packed, data::BlockStreamOptions{.batch = a.batch, .seed = seed,
                                               .rank = data_group ? static_cast<size_t>(data_group->rank()) : 0,
                                               .ranks = data_group ? static_cast<size_t>(data_group->size()) : 1,
                                               .held_back = data.held_back()});
  };
  const size_t epoch_steps = [&] {
    if (!data.streamed) return steps_in_epoch(train.size(), a.batch, a.max_steps);
    open_stream(seeds.split(100 + trainer.epoch() + 1).next_u64());  // the first epoch's (uneven shards vary it)
    return a.max_steps > 0 ? std::min(stream->steps(), a.max_steps) : stream->steps();
  }();
  // Steps [skip, skip + steps) of the epoch `epoch` describes (0 steps: to its end), ending it when
  // `end`: from memory (fit_part) or from the epoch's stream.
  const auto fit_range = [&](const train::FitOptions& epoch, size_t skip, size_t steps, bool end) {
    if (!data.streamed) return fit_part(trainer, train, epoch, skip, steps, end, "train");
    if (!stream || skip == 0 || stream->step() != skip) {
      open_stream(epoch.seed);
      stream->skip(skip);
    }
    train::FitOptions o = epoch;
    o.skip_steps = 0;
    o.end_epoch = end;
    o.label = "train";
    // An epoch's last part trains what its stream has left (its steps vary with its shards).
    o.max_steps = steps > 0 ? steps : a.max_steps > 0 ? a.max_steps - std::min(a.max_steps, skip) : 0;
    return trainer.fit_stream(*stream, stream_label_counts, o);
  };
  const size_t valid_every = valid != nullptr ? valid_every_steps(a.valid_every, valid->size(), a.batch, epoch_steps) : 0;
  if (valid_every > 0 && !a.quiet)
    say("validation: also every {} steps within an epoch of {} (--valid-every {})\n", valid_every, epoch_steps,
        a.valid_every ? std::to_string(*a.valid_every) : std::string("auto"));
  // --checkpoint-every: CHECKPOINT is saved within long epochs too, recording the steps done, so
  // that --resume goes on from there (the same batches in the same order: the epoch's seeded order
  // does not depend on the rank count).
  const size_t checkpoint_every =
      a.checkpoint.empty() ? 0 : checkpoint_every_steps(a.checkpoint_every, a.batch, epoch_steps);
  if (checkpoint_every > 0 && !a.quiet)
    say("checkpoints: also every {} steps within an epoch of {} (--checkpoint-every {})\n", checkpoint_every,
        epoch_steps, a.checkpoint_every ? std::to_string(*a.checkpoint_every) : std::string("auto"));
  // An epoch in parts between its scorings of the validation set (every valid_every steps) and its
  // checkpoints (every checkpoint_every), from step `start` (a resumed one: the steps done before);
  // a better score keeps the model there as an epoch's end does (the parts train what one call would).
  const auto fit_parts = [&](const train::FitOptions& fit_options, uint64_t epoch, size_t start) {
    train::FitResult fit;
    size_t done = start;
    const auto after = [&](size_t every) { return every > 0 ? (done / every + 1) * every : SIZE_MAX; };
    for (size_t next = std::min(after(valid_every), after(checkpoint_every)); next < epoch_steps;
         next = std::min(after(valid_every), after(checkpoint_every))) {
      fit.merge(fit_range(fit_options, done, next - done, /*end=*/false));
      done = next;
      if (valid_every > 0 && done % valid_every == 0) {
        const ValidScores v = score_valid();
        best.record(epoch, train::validation_score(v.p1, v.p5), model, keep_best, trainer.step(), /*epoch_end=*/false);
        const train::EarlyStopping::State& s = best.state();
        if (!a.quiet)
          say("epoch {} step {}/{}: valid P@1 {:.4f}, P@5 {:.4f} ({:.1f} s){}\n", epoch, done, epoch_steps, v.p1,
              v.p5, v.seconds, s.best_epoch == epoch && s.best_step == trainer.step() ? ", the best so far" : "");
        log.write({{"event", "valid"}, {"epoch", epoch}, {"epoch_step", done}, {"step", trainer.step()},
                   {"valid_p@1", v.p1}, {"valid_p@5", v.p5}, {"valid_points", v.points}, {"valid_seconds", v.seconds},
                   {"best_epoch", s.best_epoch}, {"best_step", s.best_step}, {"rank", rank}});
      }
      // After the scoring there: the run state it saves holds that score.
      if (checkpoint_every > 0 && done % checkpoint_every == 0) {
        scoring.keep_beside(a.checkpoint, rank);
        train::save_checkpoint(a.checkpoint, model, trainer, checkpoint_config, best.run_state(done, a.batch),
                               a.keep_checkpoints);
        log.write({{"event", "checkpoint"}, {"epoch", epoch}, {"epoch_step", done}, {"step", trainer.step()},
                   {"rank", rank}});
      }
    }
    fit.merge(fit_range(fit_options, done, 0, /*end=*/true));
    return fit;
  };
  // The first epoch of a run resumed within one starts there.
  size_t start = resumed_epoch_step(resumed_state, a.resume, a.batch, epoch_steps);
  uint64_t read_before = data.streamed ? data.packed->bytes_read() : 0;  // streamed: what the epochs read
  while (trainer.epoch() < a.validation.epochs && !best.should_stop() && !stop_asked) {
    const uint64_t epoch = trainer.epoch() + 1;
    const train::FitOptions fit_options{.batch = a.batch, .seed = seeds.split(100 + epoch).next_u64(),
                                 .progress = !a.quiet, .max_steps = a.max_steps};
    const nlohmann::json transport_before = transport_bytes_sent({groups.model.get(), data_group.get()});
    train::FitResult fit;
    if (calibrate && start == 0) {  // (resumed within an epoch: the next whole one calibrates)
      calibrate = false;
      fit = calibrated_epoch(a, train, fit_options, groups, grid, model, trainer_slot, build, log);
      if (groups.left) {
        say("rank {}: left out of the model by --slice-weights auto (too slow to shorten the group's step); "
                   "it has no more work in this run\n", rank);
        log.write({{"event", "left_out"}, {"epoch", epoch}, {"rank", rank}});
        result.left_out = true;
        return result;
      }
    } else if (valid_every > 0 || checkpoint_every > 0 || start > 0) {
      fit = fit_parts(fit_options, epoch, start);
    } else {
      fit = data.streamed ? fit_range(fit_options, 0, 0, /*end=*/true) : trainer.fit_epoch(train, fit_options);
    }
    const size_t resumed_at = std::exchange(start, 0);
    // The training steps' bytes per transport (the evaluation below sends more).
    const nlohmann::json transport_after = transport_bytes_sent({groups.model.get(), data_group.get()});
    const auto [step_max, step_min] = model_step_times(fit, model, *model_group);
    // The validation set first: the ensemble's blend chosen on it is the one the test set is scored
    // with (and the checkpoint records).
    const ValidScores v = score_valid();
    const double valid_p1 = v.p1, valid_p5 = v.p5, valid_seconds = v.seconds;
    const std::optional<BlendChosen>& blend = v.blend;
    // A test set of no points (the Python module's test=None, or a file "0 F L") scores nothing:
    // its metrics are null ("no test points"), not zeros.
    const bool has_test = test.size() > 0;
    const train::EvalResult ev = trainer.evaluate(test, eval_options);
    const EpochScores scores{.ev = ev, .has_test = has_test,
                             .valid_p1 = valid != nullptr ? std::optional<double>(valid_p1) : std::nullopt,
                             .valid_p5 = valid != nullptr ? std::optional<double>(valid_p5) : std::nullopt,
                             .valid_seconds = valid_seconds,
                             .step_max = step_max, .step_min = step_min};
    if (rank == 0) print_epoch(a, epoch, fit, scores, model, trainer, world->size(), grid, backoffs_said);
    std::fflush(stdout);
    nlohmann::json line = epoch_record(a, epoch, fit, scores, trainer, model, rank, restarts);
    if (resumed_at > 0) line["resumed_at_step"] = resumed_at;  // the epoch's figures count the steps after it
    if (data.streamed) {  // this rank's reads of the training file in the epoch (its share of the blocks)
      line["data_bytes_read"] = data.packed->bytes_read() - read_before;
      read_before = data.packed->bytes_read();
    }
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
    if (a.on_divergence == train::OnDivergence::skip_batch) {
      line["skipped_batches"] = fit.skipped_batches;
      if (fit.skipped_batches > 0 && rank == 0)
        say_notice("warning: epoch {}: {} batch(es) whose loss or gradients were not finite were skipped "
                           "(--on-divergence skip-batch); first at step {}\n", epoch, fit.skipped_batches,
                   fit.diverged_step);
    }
    if (valid != nullptr) {
      best.record(epoch, train::validation_score(valid_p1, valid_p5), model, keep_best);
      line["best_epoch"] = best.state().best_epoch;
      line["best_step"] = best.state().best_step;  // within best_epoch (0: at its end)
      line["valid_points"] = v.points;
      // This replica's share of them (the whole split when one scorer scores it).
      line["valid_points_scored"] = valid_share ? valid_share->size() : valid->size();
    }
    if (blend) line["ensemble_choice"] = blend_record(*blend);
    log.write(line);
    const bool go_on = report_epoch(line, a.callbacks, result, groups.world);
    if (!a.checkpoint.empty()) {
      scoring.keep_beside(a.checkpoint, rank);
      train::save_checkpoint(a.checkpoint, model, trainer, checkpoint_config, best.run_state(), a.keep_checkpoints);
    }
    if (best.should_stop() && !a.quiet)
      say("early stopping: no better validation P@1 + P@5 for {} epochs (--early-stopping {}); the best was {:.4f} after "
          "epoch {}\n", best.patience(), best.patience(), best.state().best, best.state().best_epoch);
    stop_asked = !go_on;
  }
  // The best epoch on the validation set is what the run returns (and what CHECKPOINT serves).
  const uint64_t last_epoch = trainer.epoch();
  result.model_epoch = best.restore(model, trainer.epoch(), [&](const std::string& best_dir) {
    const train::CheckpointChoice kept = train::choose_resume_checkpoint(best_dir, a.accept_unchecked_checkpoint, *groups.world);
    train::load_checkpoint(best_dir, kept.manifest, model, trainer, resume_config);
  });
  result.model_step = result.model_epoch == best.state().best_epoch ? best.state().best_step : 0;
  if ((result.model_epoch != last_epoch || result.model_step != 0) && !a.quiet)
    say("the returned model is the best epoch's on validation ({} of {}{}, valid P@1 + P@5 {:.4f}){}\n", result.model_epoch,
        last_epoch, result.model_step != 0 ? fmt::format(", at step {}", result.model_step) : "", best.state().best,
        best.best_dir().empty() ? "" : fmt::format("; {} serves it from {}", a.checkpoint, best.best_dir()));
  result.model = std::move(held);
  return result;
}

// --model dlrm (or --format criteo): the flags of the XMC network do not apply and say so; the
// shared ones go to run_dlrm.
RunResult train_dlrm(const RunArgs& given) {
  // --compress auto: DCT-DP's keep on the MLP gradients set online, one tau per parameter (DLRM's
  // selection) at its energy target; link means off here (apply_compress).
  RunArgs a = given;
  apply_compress(a);
  FRUGAL_CHECK(a.model == ModelKind::dlrm, "--format criteo is click-log data: it trains --model dlrm");
  FRUGAL_CHECK(!a.train_data,
               "--model dlrm trains from Criteo-format files: give their paths as --train and --test");
  FRUGAL_CHECK(a.given.count("--format") == 0 || a.format == data::DataFormat::criteo,
               fmt::format("--model dlrm reads Criteo-format click logs (--format criteo), not --format {}",
                           data::to_string(a.format)));
  check_trainer_support(a, TrainerKind::dlrm);  // refused by name, or said to be ignored
  RunResult result;
  result.model_epoch = run_dlrm({.train = a.train, .test = a.test, .metrics = a.metrics, .valid = a.valid,
                   .valid_fraction = a.valid_fraction, .early_stopping = a.early_stopping, .valid_every = a.valid_every,
                   .checkpoint = a.checkpoint, .resume = a.resume, .checkpoint_every = a.checkpoint_every,
                   .accept_unchecked_checkpoint = a.accept_unchecked_checkpoint,
                   .memory_limit_mib = a.memory_limit_mib, .stream = a.stream, .epochs = a.epochs, .batch = a.batch,
                   .eval_batch = a.eval_batch, .max_steps = a.max_steps,
                   .optimizer = optimizer_options(a),
                   .seed = a.seed,
                   .threads = a.threads, .quiet = a.quiet, .data_parallel = a.parallel == ParallelMode::data,
                   .device = a.device, .join = a.join,
                   .dp = dp_compression(a, comm::DpTarget::gradients),
                   .lr_schedule = a.lr_schedule, .warmup_steps = a.warmup_steps, .clip_norm = a.clip_norm,
                   .dlrm = a.dlrm, .agreed = agreed_settings(a),
                   .on_epoch = [&](const std::string& line) {
                     // The collective stop is run_dlrm's (over its world).
                     return report_epoch(nlohmann::json::parse(line), a.callbacks, result, nullptr);
                   }});
  return result;
}

// The caller's callbacks as the library's output sink (core/output.h) for the length of the run.
std::optional<ScopedOutputSink> route_output(const RunCallbacks& callbacks) {
  if (!callbacks.on_output && !callbacks.on_notice) return std::nullopt;
  return std::optional<ScopedOutputSink>(std::in_place, [&callbacks](OutputStream stream, std::string_view text) {
    const auto& to = stream == OutputStream::progress ? callbacks.on_output : callbacks.on_notice;
    if (to)
      to(text);
    else
      write_standard_stream(stream, text);
  });
}

}  // namespace

std::string_view to_string(ModelKind m) { return m == ModelKind::dlrm ? "dlrm" : "xmc"; }
std::string_view to_string(Compress c) { return c == Compress::auto_ ? "auto" : c == Compress::link ? "link" : "off"; }
std::string_view to_string(ParallelMode m) { return m == ParallelMode::data ? "data" : "model"; }
std::string_view to_string(TauEstimate t) { return t == TauEstimate::exact ? "exact" : "sampled"; }
std::string_view to_string(OutputInit i) { return i == OutputInit::centroid ? "centroid" : "random"; }

RunResult run_training(RunArgs a) {
  prepare(a);
  if (a.model == ModelKind::dlrm || a.format == data::DataFormat::criteo) return train_dlrm(a);
  return run_train(std::move(a));
}

namespace {

// The option fields library errors name, and the flags that set them (core/flag_names.h).
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

// What every run does around its training: the options checked against their declarations, the
// caller's callbacks as the output sink, this rank's --strict and --bf16-dot for the length of the
// run, and the library's field names in errors turned into the flags that set them.
RunResult run_with(RunArgs a, const RunCallbacks& callbacks) {
  check_options(a);
  const auto routed = route_output(callbacks);
  const bool strict_before = strict_warnings();
  set_strict_warnings(a.strict || strict_before);
  struct RestoreStrict {
    bool before;
    ~RestoreStrict() { set_strict_warnings(before); }
  } restore{strict_before};
  // Before any op on bf16 weights; `on` without the instruction fails here.
  kernels::set_bf16_dot(a.bf16_dot == Bf16Dot::on    ? kernels::Bf16Dot::on
                        : a.bf16_dot == Bf16Dot::off ? kernels::Bf16Dot::off
                                                     : kernels::Bf16Dot::auto_);
  a.callbacks = &callbacks;
  std::optional<RunResult> result;
  with_flag_names(kTrainFlags, "", [&] { result = run_training(std::move(a)); });
  return std::move(*result);
}

}  // namespace

std::string_view to_string(Bf16Dot d) { return d == Bf16Dot::on ? "on" : d == Bf16Dot::off ? "off" : "auto"; }

RunResult train(const TrainConfig& config, const RunCallbacks& callbacks) { return run_with(RunArgs(config), callbacks); }

RunResult train(const TrainConfig& config, data::Dataset train_set, data::Dataset test_set,
                const RunCallbacks& callbacks) {
  RunArgs a(config);
  a.train_data = std::move(train_set);
  a.test_data = std::move(test_set);
  return run_with(std::move(a), callbacks);
}

}  // namespace frugal::run
