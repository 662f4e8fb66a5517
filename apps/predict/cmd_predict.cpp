// `frugal predict` and `frugal evaluate`: use a trained model (a checkpoint directory of `frugal
// train --checkpoint`, saved by any number of ranks). Both stream their XMC input in chunks, so a
// file of any size runs in bounded memory, and both run on one rank or under `frugal launch -n N`:
// each rank then holds and scores a block of the labels, the per-rank top-k lists are merged, and
// rank 0 alone writes the output.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "train/run/dlrm_run.h"
#include "train/dlrm_checkpoint.h"
#include "train/run/rank_threads.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "comm/init.h"
#include "core/check.h"
#include "core/staged_file.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/data/fingerprint.h"
#include "core/data/xmc_reader.h"
#include "core/backend.h"
#include "core/device.h"
#include "train/predictor.h"
#include "core/data/xmc_file.h"
#include "train/checkpoint_manifest.h"
#include "apps/option_flags.h"
#include "train/run/predict_session.h"

namespace frugal::cli {

using namespace frugal::run;  // the run API's pieces these commands share with training
namespace {

// The input file, with feature ids checked against the model's input width (file:line on error).
data::XmcReader open_input(const std::string& path, const train::Predictor& predictor) {
  data::XmcReader reader(path);
  reader.limit_features(static_cast<uint32_t>(predictor.num_features()), "the model's input features F");
  return reader;
}

// Where predictions go: a StagedFile (core/staged_file.h: a failed run leaves no partial FILE, a
// device is written in place, every write checked), or stdout (checked when frugal exits).
class Output {
 public:
  explicit Output(const std::string& path) {
    if (!path.empty()) file_.emplace(path);
  }
  void write(const fmt::memory_buffer& buf) {
    if (file_) {
      file_->write(std::string_view(buf.data(), buf.size()));
    } else if (std::fwrite(buf.data(), 1, buf.size(), stdout) != buf.size()) {
      throw Error(fmt::format("standard output: write failed: {}", std::strerror(errno)));
    }
  }
  void commit() {
    if (file_) file_->commit();
    else if (std::fflush(stdout) != 0) throw Error(fmt::format("standard output: write failed: {}", std::strerror(errno)));
  }

 private:
  std::optional<StagedFile> file_;
};

struct PredictArgs : SessionArgs {
  std::string input, out;
  size_t top_k = 5;
};

void run_predict(const PredictArgs& a) {
  Session s = open_session(a, {{"command", "predict"}, {"input", a.input},
                                               {"top_k", std::to_string(a.top_k)}, {"batch", std::to_string(a.batch)}});
  data::XmcReader reader = open_input(a.input, *s.predictor);
  const bool writer = s.world->rank() == 0;
  std::optional<Output> out;
  if (writer) out.emplace(a.out);
  SparseBatch batch;
  train::Predictions top;
  fmt::memory_buffer buf;
  while (true) {
    batch.clear();
    if (reader.read(batch, a.batch) == 0) break;
    s.predictor->top_k(batch, a.top_k, top);  // collective: every rank, the same chunk
    if (!writer) continue;
    buf.clear();
    for (size_t i = 0; i < top.size(); ++i) {
      const auto labels = top.labels_of(i);
      const auto scores = top.scores_of(i);
      for (size_t j = 0; j < labels.size(); ++j)
        fmt::format_to(std::back_inserter(buf), "{}{}:{:.6g}", j == 0 ? "" : " ", labels[j], scores[j]);
      buf.push_back('\n');
    }
    out->write(buf);
  }
  if (writer) out->commit();
}

struct EvaluateArgs : SessionArgs {
  std::string test;
  std::vector<size_t> k{1, 3, 5};
  PropensityOptions propensity;
  bool json = false;
};

// Training label counts: counted from --train (streamed), else those saved with the checkpoint.
std::optional<LabelCounts> training_label_counts(const EvaluateArgs& a, const train::Predictor& predictor) {
  if (a.train.empty()) return predictor.label_counts();
  data::XmcReader reader(a.train);
  LabelCounts counts;
  counts.per_label.assign(reader.num_labels(), 0);
  SparseBatch batch;
  while (true) {
    batch.clear();
    if (reader.read(batch, 4096) == 0) break;
    counts.add(batch);
  }
  return counts;
}

void run_evaluate(const EvaluateArgs& a) {
  Session s = open_session(a, {{"command", "evaluate"}, {"test", a.test},
                                               {"k", fmt::format("{}", fmt::join(a.k, ","))},
                                               {"batch", std::to_string(a.batch)}});
  train::Predictor& predictor = *s.predictor;
  const bool writer = s.world->rank() == 0;
  // A cut-off beyond the labels ranks nothing more (and --k 1e12 would size its tables by it).
  for (const size_t k : a.k)
    FRUGAL_CHECK(k <= predictor.num_labels(), fmt::format("--k {}: more than the model's {} labels", k,
                                                          predictor.num_labels()));
  const std::optional<LabelCounts> counts = training_label_counts(a, predictor);
  std::optional<Propensities> propensities;
  if (counts) propensities.emplace(*counts, a.propensity);
  else if (writer)
    fmt::print(stderr, "{}: no training label counts in the checkpoint: PSP@k and PSnDCG@k are left out (give "
                       "--train FILE)\n", a.model);
  data::XmcReader reader = open_input(a.test, predictor);
  FRUGAL_CHECK(reader.num_labels() <= predictor.num_labels(),
               fmt::format("{}:1: the header says L = {} labels, the model has {}", a.test, reader.num_labels(),
                           predictor.num_labels()));
  RankingMetrics metrics(a.k, propensities ? &*propensities : nullptr);
  SparseBatch batch;
  train::Predictions top;
  double scoring_seconds = 0.0;
  while (true) {
    batch.clear();
    if (reader.read(batch, a.batch) == 0) break;
    const auto t = std::chrono::steady_clock::now();
    predictor.top_k(batch, metrics.max_k(), top);
    scoring_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    metrics.add(batch, top.labels);
  }
  if (!writer) return;
  // The cost of inference, on stderr so that stdout stays the metrics alone.
  const size_t points = metrics.points();
  fmt::print(stderr, "scored {} points in {:.3f} s ({:.0f} points/s, {} inference, {:.0f} labels scored per point "
                     "on rank 0)\n", points, scoring_seconds, points / std::max(scoring_seconds, 1e-9),
             to_string(s.infer),
             points > 0 ? static_cast<double>(predictor.labels_scored()) / points : 0.0);
  const auto named = metrics.values().named();
  if (a.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();  // the keys in the order of the text output
    for (const auto& [key, value] : named) out[key] = value;
    fmt::print("{}\n", out.dump());
  } else {
    for (const auto& [key, value] : named) fmt::print("{} {:.4f}\n", key, value);
  }
  std::fflush(stdout);
}

// The options predict and evaluate share, as the run API declares them (run::session_options).
void add_shared_options(CLI::App* cmd, SessionArgs& a) {
  add_declared_options(cmd, a,
                       run::session_options("as the checkpoint was trained to infer (ensemble when `frugal train` "
                                            "chose it), else exact"));
  add_strict_flag(cmd);
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand("predict", "top-k labels of every point of an XMC file with a trained model, "
                                                "one line 'label:score ...' per point (score: the logit; with --infer ensemble the blended probability)");
  cmd->add_option("--input", a->input, "XMC file (header N F L; labels may be present or absent)")->required();
  cmd->add_option("--top-k", a->top_k, "labels per point")->capture_default_str()->check(cli::positive());
  cmd->add_option("--out", a->out, "output file (default: stdout)");
  cmd->add_option("--train", a->train, "XMC training file: --infer ensemble builds from it the members the "
                                       "checkpoint lacks");
  add_shared_options(cmd, *a);
  cmd->callback([a] {
    if (train::is_dlrm_checkpoint(a->model))
      return predict_dlrm(a->model, a->input, a->out, a->batch, a->threads, a->accept_unchecked);
    run_predict(*a);
  });
}

void add_evaluate_command(CLI::App& app) {
  auto a = std::make_shared<EvaluateArgs>();
  CLI::App* cmd = app.add_subcommand("evaluate", "P@k, nDCG@k, PSP@k, PSnDCG@k, recall@k and coverage@k of a "
                                                 "trained model on an XMC test file");
  cmd->add_option("--test", a->test, "XMC test file")->required();
  cmd->add_option("--train", a->train, "XMC training file: label counts for the propensities (default: those "
                                       "saved with the checkpoint); --infer ensemble builds from it the members the "
                                       "checkpoint lacks");
  cmd->add_option("--k", a->k, "cut-offs, e.g. 1,3,5")->delimiter(',')->capture_default_str()
      ->check(cli::positive());
  cmd->add_option("--propensity-a", a->propensity.a, "propensity model parameter A")->capture_default_str()
      ->check(cli::positive());
  cmd->add_option("--propensity-b", a->propensity.b, "propensity model parameter B")->capture_default_str()
      ->check(cli::positive());
  cmd->add_flag("--json", a->json, "print one JSON object instead of one metric per line");
  add_shared_options(cmd, *a);
  cmd->callback([a] {
    if (train::is_dlrm_checkpoint(a->model))
      return evaluate_dlrm(a->model, a->test, a->batch, a->threads, a->json, a->accept_unchecked);
    a->propensity.validate();  // before the model is loaded
    run_evaluate(*a);
  });
}

}  // namespace frugal::cli
