// `frugal data synth-ctr`: a seeded Criteo-format click log with a planted click model
// (core/data/synth_ctr.h): DIR/train.tsv, DIR/test.tsv and DIR/info.json, and the Bayes-optimal
// AUC and logloss of the test set, the ceiling a trained model is measured against.
#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/data/synth_ctr.h"

namespace frugal::cli {

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
      ->capture_default_str();
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
                    "synth-ctr: ", [&] { info = data::write_synth_ctr(*o, *out); });
    const auto rate = [](size_t clicks, size_t n) { return n ? 100.0 * static_cast<double>(clicks) / n : 0.0; };
    fmt::print("wrote {0}/train.tsv ({1} samples, CTR {2:.2f}%), {0}/test.tsv ({3} samples, CTR {4:.2f}%) and "
               "{0}/info.json in {5:.1f} s\n",
               *out, o->train, rate(info.train_clicks, o->train), o->test, rate(info.test_clicks, o->test),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    fmt::print("Bayes-optimal on the test set: AUC {:.4f}, logloss {:.4f}\n", info.bayes_auc, info.bayes_logloss);
  });
}

}  // namespace frugal::cli
