#include "train/run/epoch_report.h"

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
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/trained_model.h"
#include "train/trainer.h"

namespace frugal::run {

nlohmann::json model_state(const Model& model, const train::Trainer& trainer) {
  size_t weights = 0;
  for (const Parameter* p : model.parameters()) weights += p->value.bytes();
  size_t derived = 0;
  for (const auto& layer : model.layers()) derived += layer->derived_state_bytes();
  const size_t optimizer = trainer.optimizer().state_bytes(), total = weights + optimizer + derived;
  const size_t params = model.num_parameters();
  return {{"weights", weights}, {"optimizer", optimizer}, {"lsh_tables", derived}, {"total", total},
          {"per_parameter", params > 0 ? static_cast<double>(total) / static_cast<double>(params) : 0.0}};
}

nlohmann::json parameter_rows(const Model& model, const train::FitResult& fit) {
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

nlohmann::json psp_value(const train::EvalResult& ev, bool has_test, size_t k) {
  if (!has_test) return nlohmann::json(nullptr);
  const auto it = ev.psp.find(k);
  return it == ev.psp.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second);
}

nlohmann::json epoch_record(const RunArgs& a, uint64_t epoch, const train::FitResult& fit, const EpochScores& scores,
                            const train::Trainer& trainer, const Model& model, int rank, uint64_t restarts) {
  const double per = fit.group_samples > 0 ? 1.0 / static_cast<double>(fit.group_samples) : 0.0;
  const auto ratio = [](uint64_t a, uint64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  const auto psp = [&](size_t k) { return psp_value(scores.ev, scores.has_test, k); };
  const auto test_metric = [&](double v) { return scores.has_test ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const train::EvalResult& ev = scores.ev;
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
             // The definition of achieved compression: bytes sent / bytes uncompressed.
             {"mp_sent_fraction", ratio(fit.mp_payload_sent, fit.mp_payload_uncompressed)},
             {"dp_sent_fraction", ratio(fit.dp_payload_sent, fit.dp_payload_uncompressed)},
             {"mp_payload_sent", fit.mp_payload_sent},
             {"mp_payload_uncompressed", fit.mp_payload_uncompressed},
             {"dp_payload_sent", fit.dp_payload_sent},
             {"dp_payload_uncompressed", fit.dp_payload_uncompressed},
             // What the default exact exchange of the touched rows would have sent instead.
             {"dp_payload_touched", fit.dp_payload_touched},
             {"rank", rank},
             {"peak_rss_bytes", train::peak_rss_bytes()},
             // This rank's weights, optimizer state and LSH tables, in bytes and per local parameter.
             {"model_state_bytes", model_state(model, trainer)},
             // Whole-job restarts so far under `frugal launch --max-restarts` (0 otherwise).
             {"restarts", restarts},
             // Where this rank's steps spent their time and the work of each phase (frugal bench roofline).
             {"profile", profile_to_json(fit.profile, fit.group_samples)}};
  if (scores.valid_p1) {
    line["valid_p@1"] = *scores.valid_p1;
    line["valid_p@5"] = scores.valid_p5.value_or(0.0);
    line["valid_seconds"] = scores.valid_seconds;
  }
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

void print_epoch(const RunArgs& a, uint64_t epoch, const train::FitResult& fit, const EpochScores& s, const Model& model,
                 const train::Trainer& trainer, int world_size, const Grid& grid, uint64_t& backoffs_said) {
  const train::EvalResult& ev = s.ev;
  const auto psp = [&](size_t k) { return psp_value(ev, s.has_test, k); };
  if (s.has_test)
    say("epoch {}: loss {:.4f}, {:.0f} train samples/s, {:.0f} active labels/point, P@1 {:.4f}, P@3 {:.4f}, "
               "P@5 {:.4f}, nDCG@5 {:.4f}, PSP@5 {}{} (eval {:.1f} s)\n",
               epoch, fit.loss, fit.samples_per_s, fit.labels_scored_per_sample, ev.p(1), ev.p(3), ev.p(5), ev.ndcg.at(5),
               psp(5).is_null() ? std::string("n/a") : fmt::format("{:.4f}", psp(5).get<double>()), s.valid_p1 ? fmt::format(", valid P@1 {:.4f}", *s.valid_p1) : "", ev.seconds);
  else
    say("epoch {}: loss {:.4f}, {:.0f} train samples/s, {:.0f} active labels/point, no test points{}\n", epoch,
               fit.loss, fit.samples_per_s, fit.labels_scored_per_sample,
               s.valid_p1 ? fmt::format(", valid P@1 {:.4f}", *s.valid_p1) : "");
  // The memory the optimizer choice and --precision move (the record's model_state_bytes).
  const nlohmann::json state = model_state(model, trainer);
  const auto mib = [&](const char* key) { return state[key].get<double>() / double(1 << 20); };
  say("  model state{}: {:.1f} MiB, {:.2f} B/parameter (weights {:.1f}, optimizer {:.1f}, LSH tables {:.1f} "
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
    say("{}\n", line);
    if (grid.data > 1 && a.compress == Compress::auto_) {
      const AutoKeepSummary k = auto_keep_summary(trainer);
      say("  compress auto (rank 0): DCT-DP keeps {:.4f} to {:.4f} per parameter, carrying {:.0f}% to "
                 "{:.0f}% of the gradient's energy{}\n",
                 k.keep_min, k.keep_max, 100.0 * k.energy_min, 100.0 * k.energy_max,
                 k.backoffs > backoffs_said
                     ? fmt::format("; backed off {} times this epoch (the error grew)", k.backoffs - backoffs_said)
                     : "");
      backoffs_said = k.backoffs;
    }
    if (grid.model > 1)
      say("  step compute time over the model ranks: {:.4f} s (slowest) / {:.4f} s (fastest)\n",
                 s.step_max, s.step_min);
  }
}

std::pair<float, float> model_step_times(const train::FitResult& fit, const Model& model, comm::Communicator& model_group) {
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

nlohmann::json skipped_json(const std::vector<train::SkippedCheckpoint>& skipped) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : skipped) out.push_back({{"manifest", s.manifest}, {"reason", s.reason}});
  return out;
}

uint64_t restart_count() {
  const char* text = std::getenv(std::string(comm::env::kRestartCount).c_str());
  if (text == nullptr || *text == '\0') return 0;
  return parse_number<uint64_t>(comm::env::kRestartCount, text, "a restart count (0, 1, 2, ...)");
}

}  // namespace frugal::run
