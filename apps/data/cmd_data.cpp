// `frugal data ...`: the data set tools. synth-xmc, here, writes a seeded, learnable XMC data set
// (core/data/synth_xmc.h); the others are in cmd_data_tools.cpp, cmd_data_gcide.cpp and cmd_data_ctr.cpp.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"
#include "core/data/synth_xmc.h"
#include "core/host_memory.h"
#include "core/data/xmc_file.h"

namespace frugal::cli {
namespace {

// Both sets are held in memory until they are written: more points than this machine can hold
// would end in std::bad_alloc or the OOM killer after minutes of work.
void check_synth_memory(const data::SynthXmcOptions& o) {
  const double need = o.memory_bytes();
  const std::optional<uint64_t> available = host_memory_available();
  if (!available || need <= static_cast<double>(*available)) return;
  throw Error(fmt::format("synth-xmc: --train {} and --test {} points of --nnz {} features and --labels-per-point {} "
                          "labels (--labels {}) take about {:.1f} GiB in memory while they are made, more than the "
                          "{:.1f} GiB this machine has available: make fewer or smaller points",
                          o.train, o.test, o.nnz, o.labels_per_point, o.labels, need / 1073741824.0,
                          static_cast<double>(*available) / 1073741824.0));
}

}  // namespace

void add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "data set tools");
  data->require_subcommand(1);
  add_data_tools(*data);
  add_data_ctr(*data);
  add_data_pack(*data);
  auto o = std::make_shared<data::SynthXmcOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* synth = data->add_subcommand("synth-xmc", "generate a learnable synthetic XMC data set (train.txt, test.txt)");
  // 32-bit counts: larger ones are refused in these words (0 and the generator's own bounds by
  // SynthXmcOptions::validate, naming the flag).
  synth->add_option("--features", o->features, "number of features F")->capture_default_str()->check(holds<uint32_t>());
  synth->add_option("--labels", o->labels, "number of labels L")->capture_default_str()->check(holds<uint32_t>());
  synth->add_option("--train", o->train, "training points")->capture_default_str();
  synth->add_option("--test", o->test, "test points")->capture_default_str();
  synth->add_option("--nnz", o->nnz, "features per point (before merging duplicates)")->capture_default_str()
      ->check(holds<uint32_t>());
  synth->add_option("--labels-per-point", o->labels_per_point, "labels per point")->capture_default_str()
      ->check(holds<uint32_t>());
  synth->add_option("--prototype-size", o->prototype_size, "features in each label's hidden prototype")
      ->capture_default_str()->check(holds<uint32_t>());
  synth->add_option("--noise", o->noise, "fraction of noise features")->capture_default_str();
  synth->add_option("--zipf", o->zipf, "label popularity exponent")->capture_default_str();
  synth->add_option("--seed", o->seed, "seed")->capture_default_str();
  synth->add_option("--out", *out, "output directory")->required();
  synth->callback([o, out] {
    const auto t0 = std::chrono::steady_clock::now();
    data::SynthXmc d;
    with_flag_names({{"SynthXmcOptions::features", "--features"},
                     {"SynthXmcOptions::labels", "--labels"},
                     {"SynthXmcOptions::nnz", "--nnz"},
                     {"SynthXmcOptions::labels_per_point", "--labels-per-point"},
                     {"SynthXmcOptions::prototype_size", "--prototype-size"},
                     {"SynthXmcOptions::noise", "--noise"},
                     {"SynthXmcOptions::zipf", "--zipf"}},
                    "synth-xmc: ", [&] {
                      o->validate();
                      check_synth_memory(*o);
                      d = data::generate_synth_xmc(*o);
                    });
    std::filesystem::create_directories(*out);
    data::XmcFile::write(d.train, *out + "/train.txt");
    data::XmcFile::write(d.test, *out + "/test.txt");
    fmt::print("wrote {}/train.txt ({} points) and {}/test.txt ({} points): {} features, {} labels, "
               "{:.1f} nnz and {:.1f} labels per point, in {:.1f} s\n",
               *out, d.train.size(), *out, d.test.size(), o->features, o->labels, d.train.average_nonzeros(),
               d.train.average_labels(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
}

}  // namespace frugal::cli
