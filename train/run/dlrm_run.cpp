#include "train/run/dlrm_run.h"
#include "core/say.h"
#include "train/run/memory_check.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <random>
#include <chrono>
#include <cstdio>
#include <optional>
#include <numeric>
#include <cstdint>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/run/rank_threads.h"
#include "comm/exchange_factory.h"
#include "comm/init.h"
#include "core/backend.h"
#include "core/binary_metrics.h"
#include "core/check.h"
#include "core/sealed_json.h"
#include "core/data/ctr_reader.h"
#include "core/data/ctr_stream.h"
#include "core/data/packed_file.h"
#include "core/host_memory.h"
#include "core/data/fingerprint.h"
#include "core/device.h"
#include "core/parse.h"
#include "core/rng.h"
#include "train/metrics_log.h"
#include "train/checkpoint_manifest.h"
#include "train/dlrm_checkpoint.h"
#include "train/dlrm_trainer.h"
#include "train/divergence.h"
#include "train/resume_choice.h"
#include "train/best_epoch.h"
#include "train/served_checkpoint.h"
#include "train/run/epoch_parts.h"
#include "train/run/validation_plan.h"

namespace frugal::run {
namespace {

layers::CtrView view_of(const data::CtrDataset& d) {
  return {d.size, data::kCtrDense, data::kCtrCats, d.labels, d.dense, d.cats};
}

// The shuffle seed of epoch `epoch` (1-based) of a run seeded `seed`.
uint64_t seeds_of_epoch(uint64_t seed, uint64_t epoch) { return Rng(seed).split(100 + epoch).next_u64(); }

// The configuration of the checkpoint --resume continues (empty without one, or when its manifest is
// unreadable: the resume itself then says what is wrong): its validation share and schedule are a
// resumed run's defaults.
nlohmann::json resumed_config(const DlrmRun& a) {
  if (a.resume.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(train::read_dlrm_manifest(a.resume, a.accept_unchecked_checkpoint).config);
  } catch (const std::exception&) {
    return nlohmann::json::object();
  }
}

size_t clicks_in(const data::CtrDataset& d) {
  return static_cast<size_t>(std::count_if(d.labels.begin(), d.labels.end(), [](float y) { return y > 0.5f; }));
}

// The validation set of the run, as `plan` says (none: empty). AUC ranks clicks against the rest, so
// a set without both is refused, naming where it came from.
// A streamed training set (`packed` non-null) holds back the share from a few of its blocks
// (data::hold_back_blocks) and names the samples it left out in `held_back`.
data::CtrDataset validation_set(const DlrmRun& a, const ValidationPlan& plan, data::CtrDataset& train,
                                data::PackedReader* packed, std::vector<uint64_t>& held_back) {
  data::CtrDataset valid;
  std::string what;
  if (plan.fraction > 0 && packed != nullptr) {
    const size_t count = static_cast<size_t>(std::llround(plan.fraction * static_cast<double>(packed->header().points)));
    data::CtrHeldBack held = data::hold_back_blocks(*packed, std::max<size_t>(1, count), a.seed);
    held_back = std::move(held.indices);
    valid = std::move(held.samples);
    what = fmt::format("--valid-fraction {} (the share held back from {}: {} samples)", plan.fraction, a.train, valid.size);
  } else if (plan.fraction > 0) {
    data::CtrSplit held = hold_back(train, plan.fraction, a.seed);
    train = std::move(held.train);
    valid = std::move(held.test);
    what = fmt::format("--valid-fraction {} (the share held back from {}: {} samples)", plan.fraction, a.train, valid.size);
  } else if (plan.file) {
    valid = data::load_ctr(a.valid);
    what = fmt::format("--valid {} ({} samples)", a.valid, valid.size);
  } else {
    return valid;
  }
  const size_t clicks = clicks_in(valid);
  FRUGAL_CHECK(clicks > 0 && clicks < valid.size,
               fmt::format("{} has {}: AUC needs clicks and non-clicks to rank; give {}", what,
                           valid.size == 0 ? "no samples" : clicks == 0 ? "no clicks" : "only clicks",
                           plan.file ? "another file, or --valid-fraction F" : "a larger --valid-fraction, or 0 for no validation"));
  return valid;
}

// The log's line on the validation set: what is scored, how long the run may go, where the best is.
std::string validation_line(const DlrmRun& a, const ValidationPlan& plan, const data::CtrDataset& valid,
                            size_t train_size) {
  if (!plan.on()) return plan.line.empty() ? "validation: off (--valid-fraction 0)" : plan.line;
  const std::string what = plan.file ? fmt::format("validation: {} samples of {}", valid.size, a.valid)
                                     : fmt::format("validation: {} samples ({:.1f}%) held back from the training set, {} train",
                                                   valid.size, 100.0 * plan.fraction, train_size);
  const std::string kept = a.checkpoint.empty() ? std::string("the best epoch is recorded (no --checkpoint to keep it in)")
                                                : fmt::format("the best epoch's model is kept in {}/best", a.checkpoint);
  return fmt::format("{}, scored by AUC after every epoch; {}; {}", what,
                     plan.patience > 0 ? fmt::format("early stopping after {} epochs without a better one, at most {} epoch{}",
                                                     plan.patience, plan.epochs, plan.epochs == 1 ? "" : "s")
                                       : fmt::format("no early stopping, {} epoch{}", plan.epochs, plan.epochs == 1 ? "" : "s"),
                     kept);
}

// In-memory bytes of a sample (CtrDataset: the label, 13 dense floats, 26 ids).
constexpr double kSampleBytes = 4.0 + 4.0 * data::kCtrDense + 8.0 * data::kCtrCats;

// Whether the run streams its training set from disk (core/data/ctr_stream.h) rather than holding
// it: choose_streaming's rule (train/run/memory_check.h) for its samples.
bool choose_streaming(const DlrmRun& a, const data::PackedReader* packed) {
  return run::choose_streaming(a.stream, a.train, packed != nullptr,
                               packed != nullptr ? kSampleBytes * static_cast<double>(packed->header().points) : 0.0,
                               a.memory_limit_mib);
}

std::vector<size_t> widths(const std::string& flag, const std::string& text) {
  if (text.empty() || text == "none") return {};
  return parse_list<size_t>(flag, text, "width", "comma-separated positive widths, or none",
                            [](size_t w) { return w > 0; });
}

}  // namespace

uint64_t run_dlrm(const DlrmRun& a) {
  // The CPU backend: --device auto means it for DLRM, and another device was refused by name before
  // the run (check_trainer_support, train/run/trainer_support.cpp).
  Backend& backend = resolve_device("cpu");
  backend.set_num_threads(threads_for_rank(a.threads));
  const auto t0 = std::chrono::steady_clock::now();
  // The training set: held in memory, or streamed from its packed file (choose_streaming).
  const std::unique_ptr<data::PackedReader> packed =
      data::is_packed_file(a.train) ? std::make_unique<data::PackedReader>(a.train) : nullptr;
  if (packed && packed->header().kind != data::PackedKind::clicks)
    throw Error(fmt::format("{}: a packed sparse data set (XMC or IDX), not Criteo-format click logs (it trains "
                            "--model xmc)",
                            a.train));
  const bool streaming = choose_streaming(a, packed.get());
  data::CtrDataset train = streaming ? data::CtrDataset{} : data::load_ctr(a.train);
  const size_t train_samples = streaming ? packed->header().points : train.size;
  const data::CtrDataset test = data::load_ctr(a.test);
  // The validation set and what it decides, as for every trainer (train/run/validation_plan.h); a
  // resumed run holds back the checkpoint's share and keeps its schedule.
  const nlohmann::json saved = resumed_config(a);
  const ValidationPlan plan = plan_validation(resumed_valid_fraction(a.valid_fraction, !a.valid.empty(), saved),
                                              !a.valid.empty(), a.early_stopping, train_samples, a.epochs);
  const optim::ScheduleKind schedule_kind = a.lr_schedule.value_or(resumed_schedule(saved).value_or(auto_schedule(plan)));
  std::vector<uint64_t> held_back;  // streamed: the validation share's samples, left out of every epoch
  const data::CtrDataset valid = validation_set(a, plan, train, streaming ? packed.get() : nullptr, held_back);
  // What trains: a streamed epoch has the file's samples less the share held back.
  const size_t train_size = streaming ? train_samples - held_back.size() : train.size;
  const double parse_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const DlrmArgs& d = a.dlrm;
  const std::vector<size_t> bottom = widths("--bottom", d.bottom), top = widths("--top", d.top);
  a.optimizer.validate();
  nlohmann::json config = {{"model", "dlrm"},
                           {"ids", std::string(layers::to_string(d.ids))},
                           {"embedding_dim", d.embedding_dim},
                           {"bottom", d.bottom},
                           {"top", d.top},
                           {"min_id_count", d.min_id_count},
                           {"hash_rows", d.hash_rows},
                           {"id_compression", d.id_compression},
                           {"qr_combine", std::string(layers::to_string(d.qr_combine))},
                           {"table_exchange", a.data_parallel ? "replicated" : std::string(layers::to_string(d.table_exchange))},
                           {"optimizer", optim::to_string(a.optimizer.method)},
                           {"lr", a.optimizer.lr},
                           {"momentum", a.optimizer.momentum},
                           {"weight_decay", a.optimizer.weight_decay},
                           {"sparse_updates", optim::to_string(a.optimizer.updates)},
                           {"batch", a.batch},
                           {"seed", a.seed},
                           {"epochs", plan.epochs},
                           // The share held back changes the training set: a resume must hold back the same.
                           {"valid_fraction", plan.fraction},
                           {"early_stopping", plan.patience},
                           {"dp_keep", a.dp ? a.dp->keep : 1.0f},
                           // --compress auto's target (0: the keep is fixed); ranks must agree on it.
                           {"dp_auto_energy", a.dp ? a.dp->auto_energy : 0.0f},
                           {"train_fingerprint", data::fingerprint(a.train).to_string()},
                           {"test_fingerprint", data::fingerprint(a.test).to_string()}};
  if (a.optimizer.method == optim::Method::adagrad || a.optimizer.method == optim::Method::rowwise_adagrad) config["initial_accumulator"] = a.optimizer.initial_accumulator;
  if (a.optimizer.method == optim::Method::rowwise_adam) config["rowwise_momentum"] = a.optimizer.rowwise_momentum;
  if (a.optimizer.update_threshold > 0) config["update_threshold"] = a.optimizer.update_threshold;
  // The schedule runs over every step of the run (as the XMC trainer's, train/run/run_settings.cpp).
  uint64_t steps_per_epoch = (train_size + a.batch - 1) / a.batch;
  if (a.max_steps > 0) steps_per_epoch = std::min<uint64_t>(steps_per_epoch, a.max_steps);
  const optim::LrSchedule schedule{.kind = schedule_kind, .warmup_steps = a.warmup_steps,
                                   .total_steps = steps_per_epoch * plan.epochs};
  schedule.validate();
  config["lr_schedule"] = optim::to_string(schedule_kind);
  config["warmup_steps"] = a.warmup_steps;
  if (schedule_kind != optim::ScheduleKind::constant) config["schedule_steps"] = schedule.total_steps;
  config["clip_norm"] = a.clip_norm;
  if (plan.file) config["valid_fingerprint"] = data::fingerprint(a.valid).to_string();
  // Streamed, each rank reads its own blocks: the ranks must all stream, and cut the same blocks.
  config["stream"] = streaming;
  if (streaming) config["train_blocks"] = packed->header().block_list();
  comm::RunConfig run_config;
  for (const auto& [key, value] : config.items()) run_config[key] = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Every other option as given: a rank started with another --seed or --clip-norm is named at
  // rendezvous, as in the XMC trainer's runs.
  for (const auto& [key, text] : a.agreed)
    if (!run_config.contains(key)) run_config[key] = text;
  const auto world = comm::init([&] { comm::InitOptions o = a.join; o.run_config = run_config; return o; }());
  const int rank = world->rank();
  const bool voice = rank == 0 && !a.quiet;
  if (voice && !streaming)
    say("read {} train and {} test samples ({} dense, {} categorical features, CTR {:.4f}) in {:.1f} s\n",
               train.size + (plan.fraction > 0 ? valid.size : 0), test.size, data::kCtrDense, data::kCtrCats,
               train.size > 0 ? std::accumulate(train.labels.begin(), train.labels.end(), 0.0) / train.size : 0.0,
               parse_seconds);
  if (voice && streaming)
    say("streaming {} from disk: {} samples in {} blocks ({:.0f} MiB in memory if held{}); each of {} rank(s) reads "
        "its share of the blocks an epoch, {} at a time, shuffled within them (not over the whole file); read {} test "
        "samples in {:.1f} s\n",
        a.train, train_samples, packed->header().blocks(), kSampleBytes * static_cast<double>(train_samples) / 1048576.0,
        a.stream.value_or(false) ? "; --stream on" : ", more than half of what this run may use: --stream auto",
        world->size(), data::kStreamWindowBlocks, test.size, parse_seconds);
  if (voice) say("{}\n", validation_line(a, plan, valid, train_size));
  // What a checkpoint must agree with to be resumed: the model, ids and optimizer (not the epochs,
  // the data files or how ranks share the tables, which may change).
  nlohmann::json resume_config = config;
  for (const char* key : {"epochs", "train_fingerprint", "test_fingerprint", "valid_fingerprint", "train_blocks", "stream", "early_stopping",
                          "table_exchange", "dp_keep", "dp_auto_energy"})
    resume_config.erase(key);
  // What checkpoints record besides: the training data's identity (its text's fingerprint, which a
  // packed form shares, and a streamed file's blocks), which --resume reports rather than compares
  // (a resume may read the data anew, packed or re-packed).
  nlohmann::json checkpoint_config = resume_config;
  checkpoint_config["train_data"] = {{"fingerprint", config["train_fingerprint"]}};
  if (streaming) checkpoint_config["train_data"]["blocks"] = config["train_blocks"];
  std::optional<train::DlrmCheckpointInfo> resumed;
  if (!a.resume.empty()) {
    resumed = train::read_dlrm_checkpoint(a.resume, a.accept_unchecked_checkpoint);
    // Every rank resumes the same epoch, as every trainer's ranks do (train/resume_choice.h).
    train::require_same_resume(a.resume, resumed->epoch, 0, resumed->folder, *world);
    const nlohmann::json saved = nlohmann::json::parse(resumed->config);
    train::require_same_settings(saved, resume_config, "--resume " + a.resume);
    const auto fingerprint = saved.find("train_data");
    if (voice && fingerprint != saved.end() && fingerprint->value("fingerprint", nlohmann::json()) !=
                                                   checkpoint_config["train_data"]["fingerprint"])
      say_notice("note: --resume {}: the checkpoint trained on other data ({}); --train {} is {}\n", a.resume,
                 fingerprint->value("fingerprint", nlohmann::json()).dump(), a.train,
                 checkpoint_config["train_data"]["fingerprint"].dump());
  }
  // The id map: from the checkpoint, or a counting pass over the training data (every rank makes
  // the same one).
  layers::IdCounts counts(data::kCtrCats);
  if (!resumed && d.ids != layers::IdMode::hash) {
    if (streaming)  // a counting pass over the file, block by block (memory grows with the distinct ids)
      data::for_each_block(*packed, held_back, [&](const data::CtrBatch& b) { counts.add(view_of(b)); });
    else
      counts.add(view_of(train));
  }
  const layers::IdMap ids =
      resumed ? train::load_dlrm_ids(a.resume, *resumed)
              : layers::IdMap({.mode = d.ids, .min_count = d.min_id_count, .hash_rows = d.hash_rows,
                               .compression = d.id_compression, .qr_combine = d.qr_combine,
                               .seed = Rng(a.seed).split(0x1d).next_u64()},
                              counts);
  comm::Communicator* group = world->size() > 1 ? world.get() : nullptr;
  const layers::TableMode tables = a.data_parallel ? layers::TableMode::replicated : d.table_exchange;
  {
    const double weights = static_cast<double>(ids.total_rows()) * static_cast<double>(d.embedding_dim);
    const double slices = tables == layers::TableMode::replicated ? 1.0 : static_cast<double>(world->size());
    check_model_memory(weights * 4.0 / slices,
                       fmt::format("{} embedding rows x --embedding-dim {}, over {} rank(s)", ids.total_rows(),
                                   d.embedding_dim, slices),
                       a.memory_limit_mib, "make --embedding-dim smaller, or use fewer rows (--ids hash --hash-rows, "
                                           "--min-id-count)");
  }
  layers::DlrmNetwork net({.num_dense = data::kCtrDense, .fields = layers::embedding_fields(ids),
                           .lookups = ids.lookups(), .dim = d.embedding_dim, .bottom = bottom, .top = top,
                           .seed = a.seed, .group = group, .tables = tables});
  train::DlrmTrainer trainer(net, ids, {.optimizer = a.optimizer, .batch = a.batch, .progress = voice,
                                         .lr_schedule = schedule, .clip_norm = a.clip_norm, .dp = a.dp});
  // Embedding parameters of the whole model (every rank's slice counted once).
  const size_t embedding_parameters = ids.total_rows() * d.embedding_dim;
  if (voice)
    say("model: {} ({} embedding parameters, --ids {}), {} rank(s){}, {} threads\n", net.describe(),
               embedding_parameters, layers::to_string(d.ids), world->size(),
               world->size() > 1 ? fmt::format(", tables {}", layers::to_string(tables)) : "", backend.num_threads());
  const std::string metrics = train::rank_metrics_path(a.metrics, rank);
  train::MetricsLog log = metrics.empty() ? train::MetricsLog() : train::MetricsLog(metrics, !a.resume.empty());
  log.write({{"event", "start"}, {"config", config}, {"train", a.train}, {"test", a.test}, {"rank", rank},
             {"world_size", world->size()}, {"device", device_name(backend)}});
  // The best epoch on validation: kept in CHECKPOINT/best (what evaluate and predict serve), or
  // recorded (the run hands no model back in memory).
  train::BestEpoch best(plan.patience,
                        a.checkpoint.empty() ? std::string() : (std::filesystem::path(a.checkpoint) / "best").string(),
                        a.resume.empty() ? std::string() : (std::filesystem::path(a.resume) / "best").string(),
                        /*in_memory=*/false);
  // The run's id in its checkpoints' manifests (a resumed run goes on as the same run), so that a
  // best/ of another run is never served as this one's.
  std::string run_id = fmt::format("{:016x}", (uint64_t{std::random_device{}()} << 32) | std::random_device{}());
  size_t first_epoch = 1, resume_step = 0;  // resumed within an epoch: the steps of it done
  if (resumed) {
    train::load_dlrm_state(a.resume, *resumed, net, &trainer.optimizer());
    if (!resumed->run.empty()) run_id = resumed->run;
    best.resume(nlohmann::json::parse(resumed->run_state));
    first_epoch = resumed->epoch + 1;
    resume_step = train::epoch_step_of(nlohmann::json::parse(resumed->run_state));
    if (voice)
      say("resumed from {} at epoch {}{} (saved by {} rank(s))\n", a.resume, resumed->epoch,
          resume_step > 0 ? fmt::format(", {} steps into epoch {}", resume_step, first_epoch) : "", resumed->world_size);
    // A stream's order depends on the rank count: resumed on another, the rest of the epoch is the
    // new order's, after as many steps (its samples may repeat or miss some of the epoch's).
    if (voice && resume_step > 0 && streaming && resumed->world_size != world->size())
      say_notice("note: --resume {}: saved by {} rank(s) within a streamed epoch; on {} rank(s) the rest of epoch {} "
                 "comes from their block order (some of its samples may be seen twice or not at all)\n",
                 a.resume, resumed->world_size, world->size(), first_epoch);
    log.write({{"event", "resume"}, {"checkpoint", a.resume}, {"epoch", resumed->epoch}, {"epoch_step", resume_step},
               {"saved_world_size", resumed->world_size}, {"rank", rank}});
  }
  uint64_t last = first_epoch - 1;
  // `epoch`: the epochs completed (a best kept within epoch E is saved as after E - 1, at its step).
  // `epoch_step`: the steps done of the epoch after `epoch` (a checkpoint within it; 0: at its end).
  const auto save = [&](const std::string& dir, uint64_t epoch, size_t epoch_step = 0) {
    train::save_dlrm_checkpoint(dir, checkpoint_config.dump(), epoch, ids, net, trainer.optimizer(), group, run_id,
                                (epoch_step > 0 ? best.run_state(epoch_step, a.batch) : best.run_state()).dump());
    if (epoch_step > 0)
      log.write({{"event", "checkpoint"}, {"epoch", epoch + 1}, {"epoch_step", epoch_step},
                 {"step", trainer.optimizer().steps()}, {"rank", rank}});
  };
  // One scoring of the validation set (collective); every rank takes rank 0's figures, so that
  // keeping the best (collective) is the same decision everywhere: AUC, logloss, seconds.
  const auto score_valid = [&]() {
    const auto v0 = std::chrono::steady_clock::now();
    const train::ClickMetrics vm = trainer.evaluate(view_of(valid), a.eval_batch);
    std::array<float, 2> scores = {static_cast<float>(vm.auc), static_cast<float>(vm.logloss)};
    if (world->size() > 1) world->broadcast(std::span<float>(scores), 0).wait();
    return std::array<double, 3>{scores[0], scores[1],
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - v0).count()};
  };
  // Long epochs are scored within too, every `valid_every` steps (train/run/validation_plan.h).
  // A streamed epoch: its stream (made at the epoch's start: its blocks in the epoch's order), and
  // its steps, which every rank computes alike (uneven shards can add a step or two).
  std::unique_ptr<data::CtrStream> stream;
  const auto open_stream = [&](uint64_t seed) {
    stream.reset();  // its reader thread stops first
    stream = std::make_unique<data::CtrStream>(
        *packed, data::CtrStreamOptions{.batch = a.batch, .seed = seed, .rank = static_cast<size_t>(rank),
                                        .ranks = static_cast<size_t>(world->size()),
                                        .window_blocks = data::kStreamWindowBlocks, .held_back = held_back});
  };
  const size_t epoch_steps = [&] {
    if (!streaming) return steps_in_epoch(train.size, a.batch, a.max_steps);
    open_stream(seeds_of_epoch(a.seed, first_epoch));
    return a.max_steps > 0 ? std::min(stream->steps(), a.max_steps) : stream->steps();
  }();
  // An epoch's first `steps` steps (after `done`), from memory or from its stream.
  const auto fit_steps = [&](uint64_t seed, size_t steps, const std::string& label, uint64_t epoch, size_t done, bool end) {
    if (!streaming) return trainer.fit_epoch(view_of(train), seed, steps, label, epoch, done, end);
    // A new epoch, or one resumed within: its stream, read up to `done` (as the XMC network's, run.cpp).
    if (done == 0 || stream->step() != done) {
      open_stream(seed);
      stream->skip(done);
    }
    // An epoch's last part trains what its stream has left (an epoch's steps vary with its shards).
    return trainer.fit_stream(*stream, end && a.max_steps == 0 ? 0 : steps, label, epoch, end);
  };
  const size_t valid_every = plan.on() ? valid_every_steps(a.valid_every, valid.size, a.batch, epoch_steps) : 0;
  if (valid_every > 0 && voice)
    say("validation: also every {} steps within an epoch of {} (--valid-every {})\n", valid_every, epoch_steps,
        a.valid_every ? std::to_string(*a.valid_every) : std::string("auto"));
  // --checkpoint-every: CHECKPOINT within long epochs too, so that --resume goes on from there.
  const size_t checkpoint_every =
      a.checkpoint.empty() ? 0 : checkpoint_every_steps(a.checkpoint_every, a.batch, epoch_steps);
  if (checkpoint_every > 0 && voice)
    say("checkpoints: also every {} steps within an epoch of {} (--checkpoint-every {})\n", checkpoint_every,
        epoch_steps, a.checkpoint_every ? std::to_string(*a.checkpoint_every) : std::string("auto"));
  // An epoch in parts between its scorings (every valid_every steps) and its checkpoints (every
  // checkpoint_every), from step `start` (the parts train what one call would).
  const auto fit_parts = [&](uint64_t seed, uint64_t epoch, size_t start) {
    train::FitResult fit;
    const std::string label = fmt::format("train epoch {}", epoch);
    size_t done = start;
    const auto after = [&](size_t every) { return every > 0 ? (done / every + 1) * every : SIZE_MAX; };
    for (size_t next = std::min(after(valid_every), after(checkpoint_every)); next < epoch_steps;
         next = std::min(after(valid_every), after(checkpoint_every))) {
      fit.merge(fit_steps(seed, next - done, label, epoch, done, /*end=*/false));
      done = next;
      if (checkpoint_every > 0 && done % checkpoint_every == 0 && (valid_every == 0 || done % valid_every != 0)) {
        save(a.checkpoint, epoch - 1, done);
        continue;
      }
      const std::array<double, 3> v = score_valid();
      const uint64_t step = trainer.optimizer().steps();
      best.record(epoch, v[0], [&](const std::string& dir) { save(dir, epoch - 1); }, step, /*epoch_end=*/false);
      const train::EarlyStopping::State& s = best.state();
      if (voice)
        say("epoch {} step {}/{}: valid AUC {:.4f}, logloss {:.4f} ({:.1f} s){}\n", epoch, done, epoch_steps, v[0], v[1],
            v[2], s.best_epoch == epoch && s.best_step == step ? ", the best so far" : "");
      log.write({{"event", "valid"}, {"epoch", epoch}, {"epoch_step", done}, {"step", step}, {"valid_auc", v[0]},
                 {"valid_logloss", v[1]}, {"valid_seconds", v[2]}, {"best_epoch", s.best_epoch},
                 {"best_step", s.best_step}, {"rank", rank}});
      if (checkpoint_every > 0 && done % checkpoint_every == 0) save(a.checkpoint, epoch - 1, done);  // after the score
    }
    fit.merge(fit_steps(seed, epoch_steps - done, label, epoch, done, /*end=*/true));
    return fit;
  };
  // The first epoch of a run resumed within one starts there.
  size_t start = resumed ? resumed_epoch_step(nlohmann::json::parse(resumed->run_state), a.resume, a.batch, epoch_steps) : 0;
  for (size_t epoch = first_epoch; epoch <= plan.epochs && !best.should_stop(); ++epoch) {
    const comm::ByteCount before = world->stats().total();
    const uint64_t read_before = packed ? packed->bytes_read() : 0;
    const uint64_t dp_sent_before = trainer.dp_payload_sent(), dp_full_before = trainer.dp_payload_uncompressed();
    const uint64_t seed = seeds_of_epoch(a.seed, epoch);
    const size_t resumed_at = std::exchange(start, 0);
    const train::FitResult fit = valid_every > 0 || checkpoint_every > 0 || resumed_at > 0
                                     ? fit_parts(seed, epoch, resumed_at)
                                     : fit_steps(seed, a.max_steps, fmt::format("train epoch {}", epoch), epoch, 0,
                                                 /*end=*/true);
    // The group's loss (the same on every rank): a diverged epoch stops before its checkpoint.
    if (!std::isfinite(fit.loss)) train::throw_divergence(train::divergence_where(epoch, 0), "training loss", fit.loss, 0.0);
    comm::ByteCount wire = world->stats().total();
    wire -= before;
    // The validation set first (collective, as the test set's scoring); every rank takes rank 0's
    // figures, so that keeping the best (collective) is the same decision everywhere.
    const std::array<double, 3> valid_scores = plan.on() ? score_valid() : std::array<double, 3>{0.0, 0.0, 0.0};
    const double valid_seconds = valid_scores[2];
    const auto e0 = std::chrono::steady_clock::now();
    const train::ClickMetrics m = trainer.evaluate(view_of(test), a.eval_batch);
    const double eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    const double per = fit.samples > 0 ? 1.0 / static_cast<double>(fit.samples) : 0.0;
    const uint64_t dp_sent = trainer.dp_payload_sent() - dp_sent_before;
    const uint64_t dp_full = trainer.dp_payload_uncompressed() - dp_full_before;
    const double dp_compression = dp_sent > 0 ? static_cast<double>(dp_full) / static_cast<double>(dp_sent) : 0.0;
    if (rank == 0) {  // even with --quiet, as every trainer's epoch lines
      say("epoch {}: loss {:.4f}, {:.0f} train samples/s, {}AUC {:.4f}, logloss {:.4f} (eval {:.1f} s)\n", epoch,
                 fit.loss, fit.samples_per_s, plan.on() ? fmt::format("valid AUC {:.4f}, ", valid_scores[0]) : "",
                 m.auc, m.logloss, eval_seconds);
      if (world->size() > 1)
        say("  wire: {:.0f} B/sample sent ({} tables{})\n", static_cast<double>(wire.sent) * per,
                   layers::to_string(tables),
                   a.dp ? fmt::format(", MLP gradients {:.1f}x compressed by DCT-DP", dp_compression) : "");
    }
    std::fflush(stdout);
    nlohmann::json line = {{"event", "epoch"},
               {"epoch", epoch},
               {"resumed_at_step", resumed_at},  // the epoch's figures count the steps after it (0: all)
               {"loss", fit.loss},
               {"train_samples_per_s", fit.samples_per_s},
               {"train_seconds", fit.seconds},
               {"steps", fit.steps},
               {"auc", m.auc},
               {"logloss", m.logloss},
               {"eval_seconds", eval_seconds},
               {"embedding_parameters", embedding_parameters},
               {"bytes_sent_per_sample", static_cast<double>(wire.sent) * per},
               {"bytes_received_per_sample", static_cast<double>(wire.received) * per},
               {"dp_compression", dp_compression},
               {"dp_payload_sent", dp_sent},
               {"dp_payload_uncompressed", dp_full},
               {"rank", rank},
               {"peak_rss_bytes", train::peak_rss_bytes()}};
    if (streaming) line["data_bytes_read"] = packed->bytes_read() - read_before;  // this rank's share of the file
    if (a.clip_norm > 0) {  // as the XMC trainer's records: how often clipping acted, to tune --clip-norm
      line["grad_norm"] = fit.grad_norm;
      line["clipped_fraction"] = fit.steps > 0 ? static_cast<double>(fit.clipped_steps) / static_cast<double>(fit.steps) : 0.0;
    }
    if (plan.on()) {
      line["valid_auc"] = valid_scores[0];
      line["valid_logloss"] = valid_scores[1];
      line["valid_seconds"] = valid_seconds;
      best.record(epoch, valid_scores[0], [&](const std::string& dir) { save(dir, epoch); });
      line["best_epoch"] = best.state().best_epoch;
      line["best_step"] = best.state().best_step;  // within best_epoch (0: at its end)
    }
    log.write(line);
    if (!a.checkpoint.empty()) save(a.checkpoint, epoch);
    last = epoch;
    if (best.should_stop() && voice)
      say("early stopping: no better valid AUC for {} epochs (--early-stopping {}); the best was {:.4f} after epoch {}\n",
          best.patience(), best.patience(), best.state().best, best.state().best_epoch);
    if (a.on_epoch) {
      // Stopped on any rank: every rank stops after this epoch's checkpoint.
      float stop = a.on_epoch(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) ? 0.0f : 1.0f;
      if (world->size() > 1) world->all_reduce(std::span<float>(&stop, 1), comm::ReduceOp::max).wait();
      if (stop != 0.0f) break;
    }
  }
  // What the folder serves: the best epoch's model when CHECKPOINT/best keeps it.
  const uint64_t best_epoch = best.state().best_epoch, best_step = best.state().best_step;
  if (best_epoch == 0 || (best_epoch == last && best_step == 0)) return last;
  if (voice)
    say("the best epoch on validation was {}{} of {} (valid AUC {:.4f}); {}\n", best_epoch,
        best_step != 0 ? fmt::format(" (at step {})", best_step) : "", last, best.state().best,
        a.checkpoint.empty() ? std::string("give --checkpoint DIR to keep it")
                             : fmt::format("{} serves it from {}", a.checkpoint, best.best_dir()));
  return a.checkpoint.empty() ? last : best_epoch;
}

namespace {

// The network and id map a DLRM checkpoint holds, on the CPU backend of this process.
struct LoadedDlrm {
  train::DlrmCheckpointInfo info;
  layers::IdMap ids;
  std::unique_ptr<layers::DlrmNetwork> net;
};

LoadedDlrm load_dlrm(const std::string& folder, int threads, bool accept_unchecked) {
  Backend& backend = resolve_device("cpu");
  backend.set_num_threads(threads_for_rank(threads));
  // The folder's best epoch on validation when the run kept one (train/served_checkpoint.h).
  const train::ServedCheckpoint served = train::served_checkpoint(folder, accept_unchecked);
  const std::string& model = served.dir;
  LoadedDlrm m{train::read_dlrm_checkpoint(model, accept_unchecked), {}, nullptr};
  // Which epoch this is (stderr: predict's output may be stdout).
  fmt::print(stderr, "{}: epoch {}{}{}{}\n", folder, m.info.epoch,
             m.info.step != 0 ? fmt::format(", step {}", m.info.step) : std::string(),
             m.info.run.empty() ? std::string() : fmt::format(" of run {}", m.info.run),
             served.best ? fmt::format(" (the best epoch on validation, from {}; the newest is epoch {})", served.dir,
                                       served.newest_epoch)
                         : std::string());
  m.ids = train::load_dlrm_ids(model, m.info);
  const nlohmann::json c = nlohmann::json::parse(m.info.config);
  try {
  const auto get = [&](const char* key) -> const nlohmann::json& {
    FRUGAL_CHECK(c.contains(key), fmt::format("{}/manifest.json: the configuration has no '{}'", model, key));
    return c.at(key);
  };
  m.net = std::make_unique<layers::DlrmNetwork>(layers::DlrmOptions{
      .num_dense = data::kCtrDense, .fields = layers::embedding_fields(m.ids), .lookups = m.ids.lookups(),
      .dim = get("embedding_dim").get<size_t>(), .bottom = widths("bottom", get("bottom").get<std::string>()),
      .top = widths("top", get("top").get<std::string>()), .seed = get("seed").get<uint64_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}/manifest.json: the configuration has {}", model, json_error_words(e)));
  }
  train::load_dlrm_state(model, m.info, *m.net, nullptr);
  return m;
}

// Click probabilities of every sample of `path`, streamed in batches.
template <class Sink>
void score_file(LoadedDlrm& m, const std::string& path, size_t batch, Sink&& sink) {
  FRUGAL_CHECK(batch > 0, "--batch must be > 0");
  data::CtrReader reader(path);
  data::CtrBatch b;
  std::vector<uint32_t> rows;
  std::vector<float> probabilities;
  while (reader.next(batch, b) > 0) {
    const layers::CtrView view{b.size, data::kCtrDense, data::kCtrCats, b.labels, b.dense, b.cats};
    m.ids.map(view, rows);
    m.net->predict(view, rows, probabilities);
    sink(view, probabilities);
  }
}

}  // namespace

void evaluate_dlrm(const std::string& model, const std::string& test, size_t batch, int threads, bool json,
                   bool accept_unchecked) {
  LoadedDlrm m = load_dlrm(model, threads, accept_unchecked);
  std::vector<float> all_p, all_y;
  score_file(m, test, batch, [&](const layers::CtrView& v, const std::vector<float>& p) {
    all_p.insert(all_p.end(), p.begin(), p.end());
    all_y.insert(all_y.end(), v.labels.begin(), v.labels.end());
  });
  const double a = auc(all_p, all_y), l = logloss(all_p, all_y);
  const auto clicks = static_cast<size_t>(std::count_if(all_y.begin(), all_y.end(), [](float y) { return y > 0.5f; }));
  if (json) {
    say("{}\n", nlohmann::ordered_json{{"auc", a}, {"logloss", l}, {"samples", all_y.size()}, {"clicks", clicks}}.dump());
  } else {
    say("auc {:.4f}\nlogloss {:.4f}\nsamples {}\nclicks {}\n", a, l, all_y.size(), clicks);
  }
}

void predict_dlrm(const std::string& model, const std::string& input, const std::string& out, size_t batch,
                  int threads, bool accept_unchecked) {
  LoadedDlrm m = load_dlrm(model, threads, accept_unchecked);
  std::FILE* f = out.empty() ? stdout : std::fopen(out.c_str(), "w");
  FRUGAL_CHECK(f != nullptr, fmt::format("--out {}: cannot be written", out));
  try {
    score_file(m, input, batch, [&](const layers::CtrView&, const std::vector<float>& p) {
      for (float x : p) fmt::print(f, "{:.6f}\n", x);
    });
  } catch (...) {
    if (f != stdout) std::fclose(f);
    throw;
  }
  FRUGAL_CHECK(std::fflush(f) == 0 && (f == stdout || std::fclose(f) == 0), fmt::format("--out {}: write failed", out));
}

}  // namespace frugal::run
