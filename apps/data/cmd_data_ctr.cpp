// `frugal data synth-ctr`: a seeded Criteo-format click log with a planted click model
// (core/data/synth_ctr.h): DIR/train.tsv, DIR/test.tsv and DIR/info.json, and the Bayes-optimal
// AUC and logloss of the test set, the ceiling a trained model is measured against.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"
#include "core/data/synth_ctr.h"
#include "core/host_memory.h"

namespace frugal::cli {
namespace {

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / 1073741824.0); }

// The logs stream to disk and the test set's scores stay in memory: more samples than the output's
// file system or this machine can hold would run for hours and end in a full disk or the OOM killer.
void check_synth_ctr_room(const data::SynthCtrOptions& o, const std::string& out) {
  if (const std::optional<uint64_t> available = host_memory_available();
      available && o.memory_bytes() > static_cast<double>(*available))
    throw Error(fmt::format("synth-ctr: --vocab-scale {} with --embedding-dim {} and --test {} samples take about {} in "
                            "memory, more than the {} this machine has available",
                            o.vocab_scale, o.embedding_dim, o.test, gib(o.memory_bytes()),
                            gib(static_cast<double>(*available))));
  // The file system the output folder is (or will be) on: its nearest existing folder's.
  std::filesystem::path at = std::filesystem::absolute(out);
  std::error_code ec;
  while (!at.empty() && !std::filesystem::exists(at, ec) && at != at.parent_path()) at = at.parent_path();
  const std::filesystem::space_info space = std::filesystem::space(at, ec);
  if (!ec && o.file_bytes() > static_cast<double>(space.available))
    throw Error(fmt::format("synth-ctr: --train {} and --test {} samples take at least {} on disk, more than the {} "
                            "free where --out {} is",
                            o.train, o.test, gib(o.file_bytes()), gib(static_cast<double>(space.available)), out));
}

}  // namespace

void add_data_ctr(CLI::App& data) {
  auto o = std::make_shared<data::SynthCtrOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = data.add_subcommand(
      "synth-ctr", "generate Criteo-format click logs with a planted click model (train.tsv, test.tsv, info.json)");
  cmd->add_option("--train", o->train, "training samples")->capture_default_str();
  cmd->add_option("--test", o->test, "test samples")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed")->capture_default_str();
  cmd->add_option("--vocab-scale", o->vocab_scale, "multiplies the field vocabularies (10 .. 100k ids at 1)")
      ->capture_default_str();
  cmd->add_option("--zipf", o->zipf, "exponent of the id frequencies")->capture_default_str();
  cmd->add_option("--embedding-dim", o->embedding_dim, "dimension of the planted field embeddings")
      ->capture_default_str()->check(holds<uint32_t>());
  cmd->add_option("--noise", o->noise, "sd of the unseen noise added to the click logit")->capture_default_str();
  cmd->add_option("--ctr", o->base_ctr, "mean click rate")->capture_default_str();
  cmd->add_option("--out", *out, "output directory")->required();
  cmd->callback([o, out] {
    const auto t0 = std::chrono::steady_clock::now();
    data::SynthCtrInfo info;
    with_flag_names({{"SynthCtrOptions::vocab_scale", "--vocab-scale"},
                     {"SynthCtrOptions::zipf", "--zipf"},
                     {"SynthCtrOptions::embedding_dim", "--embedding-dim"},
                     {"SynthCtrOptions::noise", "--noise"},
                     {"SynthCtrOptions::base_ctr", "--ctr"}},
                    "synth-ctr: ", [&] {
                      o->validate();
                      check_synth_ctr_room(*o, *out);
                      info = data::write_synth_ctr(*o, *out);
                    });
    const auto rate = [](size_t clicks, size_t n) { return n ? 100.0 * static_cast<double>(clicks) / n : 0.0; };
    fmt::print("wrote {0}/train.tsv ({1} samples, CTR {2:.2f}%), {0}/test.tsv ({3} samples, CTR {4:.2f}%) and "
               "{0}/info.json in {5:.1f} s\n",
               *out, o->train, rate(info.train_clicks, o->train), o->test, rate(info.test_clicks, o->test),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    fmt::print("Bayes-optimal on the test set: AUC {:.4f}, logloss {:.4f}\n", info.bayes_auc, info.bayes_logloss);
  });
}

}  // namespace frugal::cli
