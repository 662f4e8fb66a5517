#include "train/run/pipeline_run.h"
#include "core/say.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/run/step_profile_json.h"
#include "comm/codec.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/parse.h"
#include "core/rng.h"
#include "train/best_epoch.h"
#include "train/checkpoint_history.h"
#include "train/metrics_log.h"
#include "train/pipeline_checkpoint.h"
#include "train/resume_choice.h"

namespace frugal::run {
namespace {

nlohmann::json metric(bool has_test, double v) { return has_test ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json psp(const train::EvalResult& ev, bool has_test, size_t k) {
  const auto it = ev.psp.find(k);
  return !has_test || it == ev.psp.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second);
}

}  // namespace

uint64_t run_pipeline(comm::Communicator& world, PipelineRun r) {
  const int rank = world.rank();
  FRUGAL_CHECK(world.size() == r.stages * r.replicas * r.slices,
               fmt::format("--pipeline {} with {} replicas of {} slices needs {} ranks, but the run has {}", r.stages,
                           r.replicas, r.slices, r.stages * r.replicas * r.slices, world.size()));
  FRUGAL_CHECK(r.backend->device().is_host(),
               fmt::format("--pipeline runs its stages on the CPU backend; this rank's device is {} (use --device cpu)",
                           r.backend->device().name()));
  // Rank = (replica x S + stage) x M + slice: a stage's M slices are neighbours.
  const int slices = r.slices, slice = rank % slices, stage = (rank / slices) % r.stages,
            replica = rank / (slices * r.stages);
  auto pipeline = world.split(replica * slices + slice, rank);  // slice m of every stage of this replica
  auto stage_group = world.split(replica * r.stages + stage, rank);
  auto replicas = world.split(stage * slices + slice, rank);
  const std::vector<double> costs = layers::layer_costs(r.spec, r.train->average_nonzeros());
  const std::vector<size_t> split = split_stages(costs, static_cast<size_t>(r.stages), r.stage_split);
  size_t first = 0;
  for (int s = 0; s < stage; ++s) first += split[s];
  Model model;
  layers::build_network_stage(model, r.spec, first, first + split[stage],
                              slices > 1 ? Placement::sliced(*stage_group) : Placement{});
  model.set_backend(r.backend);
  train::PipelineOptions options = r.options;
  options.pipeline = pipeline.get();
  options.data = replicas.get();
  options.model = slices > 1 ? stage_group.get() : nullptr;
  options.first_layer = first;
  options.total_layers = costs.size();
  train::PipelineTrainer trainer(model, options);
  const bool voice = rank == 0 && !r.quiet;
  const auto describe_split = [&] {
    std::vector<std::string> parts;
    for (size_t s = 0, l = 0; s < split.size(); l += split[s], ++s)
      parts.push_back(split[s] == 1 ? fmt::format("{}", l) : fmt::format("{}-{}", l, l + split[s] - 1));
    return fmt::format("{}", fmt::join(parts, " | "));
  };
  if (voice) {
    const double bubble = static_cast<double>(r.stages - 1) / static_cast<double>(options.micro_batches + r.stages - 1);
    say("pipeline: {} stages (layers {}{}), {} micro-batches of ~{} points (1F1B, bubble {:.0f}%), {} "
               "replica(s); boundary {}\n",
               r.stages, describe_split(), r.stage_split.empty() ? ", split by estimated cost" : "",
               options.micro_batches, (r.batch + options.micro_batches - 1) / options.micro_batches, 100.0 * bubble,
               r.replicas,
               options.boundary.keep >= 1.0 && options.boundary.mass >= 1.0 && options.boundary.wire == comm::ValueType::f32
                   ? std::string("uncompressed (f32)")
                   : fmt::format("DCT-MP keep {:g}{}, {} values{}", options.boundary.keep,
                                 options.boundary.mass < 1.0 ? fmt::format(" (mass {:g})", options.boundary.mass) : "",
                                 comm::to_string(options.boundary.wire),
                                 options.boundary.error_feedback ? ", error feedback" : ""));
    say("model: stage 0 holds {} ({} parameters on this rank), device {}, {} threads, {} rank(s) as a {}x{}x{} "
               "grid ({})\n",
               model.describe(), model.num_parameters(), r.backend->device().name(), r.backend->num_threads(),
               world.size(), r.replicas, slices, r.stages, world.backend());
  }
  // The best epoch on validation: CHECKPOINT/best is what the folder serves (no model is returned).
  train::BestEpoch best(r.patience, r.checkpoint.empty() ? std::string() : (std::filesystem::path(r.checkpoint) / "best").string(),
                        {}, /*in_memory=*/false);
  std::optional<train::CheckpointManifest> resumed;
  if (!r.resume.empty()) {
    // The same choice on every rank, checked as every trainer's (train/resume_choice.h).
    const train::CheckpointChoice choice = train::choose_resume_checkpoint(r.resume, r.accept_unchecked_checkpoint, world);
    resumed = train::load_pipeline_checkpoint(r.resume, choice.manifest, trainer, r.checkpoint_config);
    best.resume(resumed->run_state);
    if (voice)
      say("resumed from {} at epoch {}, step {} (saved by {} rank(s) in {} model slice(s)); each stage took its "
                 "layers\n", r.resume, resumed->epoch, resumed->step, resumed->world_size, resumed->model_slices);
  }
  train::MetricsLog log = r.metrics.empty() ? train::MetricsLog() : train::MetricsLog(train::rank_metrics_path(r.metrics, rank), !r.resume.empty());
  const nlohmann::json pipeline_record = {{"stages", r.stages}, {"micro_batches", options.micro_batches},
                                          {"stage", stage}, {"layers", {first, first + split[stage]}},
                                          {"split", split}, {"replicas", r.replicas}, {"slices", slices},
                                          {"slice", slice}};
  log.write({{"event", "start"}, {"config", r.start_config}, {"train_points", r.train->size()},
             {"threads", r.backend->num_threads()}, {"device", r.backend->device().name()},
             {"parameters", model.num_parameters()}, {"epoch", trainer.epoch()}, {"rank", rank},
             {"world_size", world.size()}, {"grid", {r.replicas, slices, r.stages}}, {"backend", world.backend()},
             {"pipeline", pipeline_record}});
  if (!resumed && r.centroid_init) {
    const auto t = std::chrono::steady_clock::now();
    trainer.init_output_from_centroids(*r.train, r.centroid_scale, r.eval_batch);
    if (voice)
      say("output rows set to label centroids in hidden space in {:.1f} s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  const Rng seeds(r.seed);
  while (trainer.epoch() < r.epochs && !best.should_stop()) {
    const uint64_t epoch = trainer.epoch() + 1;
    const train::FitResult fit = trainer.fit_epoch(*r.train, {.batch = r.batch, .seed = seeds.split(100 + epoch).next_u64(),
                                                       .progress = voice, .max_steps = r.max_steps});
    // Per stage, in one all-gather: compute seconds per step and the bytes it put on the pipeline's links.
    struct StageFigures {
      double step_seconds, sent, payload, uncompressed;
    };
    const std::vector<StageFigures> stage_figures = comm::all_gather_value(
        *pipeline,
        StageFigures{fit.step_seconds(), static_cast<double>(fit.mp_bytes_sent), static_cast<double>(fit.mp_payload_sent),
                     static_cast<double>(fit.mp_payload_uncompressed)},
        "stage's epoch figures");
    double boundary_sent = 0.0, sent = 0.0, whole = 0.0;
    double slowest = 0.0, fastest = stage_figures.front().step_seconds;
    for (const StageFigures& f : stage_figures) {
      boundary_sent += f.sent;
      sent += f.payload;
      whole += f.uncompressed;
      slowest = std::max(slowest, f.step_seconds);
      fastest = std::min(fastest, f.step_seconds);
    }
    const double per = fit.group_samples > 0 ? 1.0 / static_cast<double>(fit.group_samples) : 0.0;
    const double boundary_per_sample = boundary_sent * per;
    const double compression = sent > 0.0 ? whole / sent : 0.0;
    const bool has_test = r.test->size() > 0;
    const train::EvalResult ev = trainer.evaluate(*r.test, r.eval);
    // The validation set's P@1 and P@5: the last stage's, rank 0's on every rank (the same choice everywhere).
    double valid_p1 = -1.0, valid_p5 = -1.0;
    if (r.valid != nullptr) {
      train::EvalOptions valid_eval = r.eval;
      valid_eval.k = {1, 5};
      valid_eval.propensities = nullptr;
      const train::EvalResult v = trainer.evaluate(*r.valid, valid_eval);
      std::array<float, 2> said = {static_cast<float>(v.p(1)), static_cast<float>(v.p(5))};
      world.broadcast(std::span<float>(said), 0).wait();
      valid_p1 = said[0];
      valid_p5 = said[1];
    }
    const std::string valid_text = r.valid != nullptr ? fmt::format(", valid P@1 {:.4f}", valid_p1) : "";
    if (rank == 0) {  // even with --quiet, as every mode's epoch lines
      if (has_test)
        say("epoch {}: loss {:.4f}, {:.0f} train samples/s, {:.0f} active labels/point, P@1 {:.4f}, P@3 {:.4f}, "
                   "P@5 {:.4f}, nDCG@5 {:.4f}{} (eval {:.1f} s)\n",
                   epoch, fit.loss, fit.samples_per_s, fit.labels_scored_per_sample, ev.p(1), ev.p(3), ev.p(5),
                   ev.ndcg.at(5), valid_text, ev.seconds);
      else
        say("epoch {}: loss {:.4f}, {:.0f} train samples/s, no test points{}\n", epoch, fit.loss, fit.samples_per_s,
            valid_text);
      if (r.stages == 1)
        say("  pipeline: one stage, {} micro-batches a step (gradient accumulation); step compute {:.4f} s\n",
                   options.micro_batches, slowest);
      else
        say("  pipeline: {:.0f} B/sample across the stage boundaries (DCT-MP compression {:.1f}x){}; step compute "
                 "per stage {:.4f} s (slowest) / {:.4f} s (fastest)\n",
                 boundary_per_sample, compression,
                 r.replicas > 1 ? fmt::format(", data-parallel {:.0f} B/sample (rank 0)",
                                              static_cast<double>(fit.dp_bytes_sent) * per)
                                : "",
                 slowest, fastest);
    }
    std::fflush(stdout);
    nlohmann::json line = {{"event", "epoch"}, {"epoch", epoch}, {"loss", fit.loss},
                           {"train_samples_per_s", fit.samples_per_s}, {"train_seconds", fit.seconds},
                           {"p@1", metric(has_test, ev.p(1))}, {"p@3", metric(has_test, ev.p(3))},
                           {"p@5", metric(has_test, ev.p(5))}, {"ndcg@1", metric(has_test, ev.ndcg.at(1))},
                           {"ndcg@3", metric(has_test, ev.ndcg.at(3))}, {"ndcg@5", metric(has_test, ev.ndcg.at(5))},
                           {"psp@1", psp(ev, has_test, 1)}, {"psp@3", psp(ev, has_test, 3)}, {"psp@5", psp(ev, has_test, 5)},
                           {"eval_seconds", ev.seconds}, {"eval_labels_scored_per_sample", ev.labels_scored_per_sample},
                           {"active_per_sample", fit.labels_scored_per_sample}, {"steps", trainer.step()},
                           {"rank_step_seconds_max", slowest},
                           {"rank_step_seconds_min", fastest},
                           {"bytes_sent_per_sample", static_cast<double>(fit.bytes_sent) * per},
                           {"bytes_received_per_sample", static_cast<double>(fit.bytes_received) * per},
                           // Every stage's boundary messages per sample (activations forward, gradients back).
                           {"pipeline_bytes_sent_per_sample", boundary_per_sample},
                           {"mp_bytes_sent_per_sample", static_cast<double>(fit.mp_bytes_sent) * per},
                           {"dp_bytes_sent_per_sample", static_cast<double>(fit.dp_bytes_sent) * per},
                           {"mp_compression", compression},
                           {"mp_sent_fraction", whole > 0.0 ? sent / whole : 0.0},
                           {"dp_compression", fit.dp_compression()},
                           {"pipeline", pipeline_record},
                           {"rank", rank}, {"peak_rss_bytes", train::peak_rss_bytes()}, {"restarts", r.restarts},
                           {"profile", profile_to_json(fit.profile, fit.group_samples)}};
    if (r.options.clip_norm > 0) {  // as the XMC trainer's records: how often clipping acted
      line["grad_norm"] = fit.grad_norm;
      line["clipped_fraction"] = fit.steps > 0 ? static_cast<double>(fit.clipped_steps) / static_cast<double>(fit.steps) : 0.0;
    }
    if (r.valid != nullptr) {
      line["valid_p@1"] = valid_p1;
      line["valid_p@5"] = valid_p5;
      best.record(epoch, train::validation_score(valid_p1, valid_p5), model, [&](const std::string& best_dir) {
        if (r.before_checkpoint) r.before_checkpoint(best_dir);
        train::save_pipeline_checkpoint(best_dir, trainer, r.checkpoint_config, best.run_state(), 1);
      });
      line["best_epoch"] = best.state().best_epoch;
    }
    log.write(line);
    const bool go_on = !r.on_epoch || r.on_epoch(line);
    if (!r.checkpoint.empty() && r.before_checkpoint) r.before_checkpoint(r.checkpoint);
    if (!r.checkpoint.empty())
      train::save_pipeline_checkpoint(r.checkpoint, trainer, r.checkpoint_config, best.run_state(), r.keep_checkpoints);
    if (best.should_stop() && voice)
      say("early stopping: no better validation P@1 + P@5 for {} epochs (--early-stopping {}); the best was {:.4f} after "
          "epoch {}\n", best.patience(), best.patience(), best.state().best, best.state().best_epoch);
    if (!go_on) break;
  }
  const uint64_t served = best.state().best_epoch > 0 && !r.checkpoint.empty() ? best.state().best_epoch : trainer.epoch();
  if (voice && served != trainer.epoch())
    say("the best epoch on validation ({} of {}, valid P@1 + P@5 {:.4f}) is what {} serves (from {}/best)\n", served,
        trainer.epoch(), best.state().best, r.checkpoint, r.checkpoint);
  return served;
}

}  // namespace frugal::run
