// `frugal data stats|shuffle|split|fashion-mnist|references`: statistics of an XMC file, an IDX
// set or a Criteo-format file (--format; .tsv and .tsv.gz files are Criteo's unless it says else), shuffling and splitting XMC files, the Fashion-MNIST conversion and the reference
// rankers; add_data_tools also registers `gcide` (cmd_data_gcide.cpp). Each reads whole data sets
// (the XMC reader streams the text; only the parsed points stay in memory) and writes XMC files
// through XmcFile::write.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/data_file_option.h"
#include "train/run/train_inputs.h"
#include "core/check.h"
#include "core/data/ctr_stats.h"
#include "core/data/dataset_split.h"
#include "core/data/data_warnings.h"
#include "core/staged_file.h"
#include "core/data/dataset_stats.h"
#include "core/data/idx_file.h"
#include "core/data/xmc_file.h"

namespace frugal::cli {

using namespace frugal::run;  // the run API's pieces these commands share with training
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void add_stats(CLI::App& data) {
  auto a = std::make_shared<DataFileArgs>();
  CLI::App* cmd = data.add_subcommand(
      "stats", "print statistics of a data set (points, dimensions, label histogram; for Criteo files, ids per field)");
  add_data_file(cmd, *a, "file", "XMC file, IDX prefix with --format idx, Criteo-format file (.tsv[.gz]), or a packed file");
  add_strict_flag(cmd);
  cmd->callback([a] {
    const data::DataFormat f = a->resolved();
    if (f == data::DataFormat::criteo) {
      data::CtrReader reader(a->file);  // streams: memory grows with the distinct ids only
      fmt::print("{} (criteo)\n{}", a->file, data::compute_ctr_stats(reader).format("  "));
      return;
    }
    const data::Dataset d = open_input(f, a->file);
    data::warn_suspicious(d);
    fmt::print("{}\n{}", a->file, data::compute_stats(d).format("  "));
  });
}

void add_shuffle(CLI::App& data) {
  struct Args {
    std::string in, out;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand("shuffle", "write an XMC file's points in a seeded random order");
  cmd->add_option("in", a->in, "input XMC file")->required();
  cmd->add_option("out", a->out, "output XMC file")->required();
  cmd->add_option("--seed", a->seed, "seed of the order")->capture_default_str();
  cmd->callback([a] {
    const auto t0 = std::chrono::steady_clock::now();
    const data::Dataset d = data::XmcFile::open(a->in);  // first: names a missing input clearly
    FRUGAL_CHECK(!std::filesystem::exists(a->out) || !std::filesystem::equivalent(a->in, a->out),
                 fmt::format("{}: output and input are the same file", a->out));
    data::XmcFile::write(data::shuffle(d, a->seed), a->out);
    fmt::print("wrote {} ({} points shuffled with seed {}) in {:.1f} s\n", a->out, d.size(), a->seed, seconds_since(t0));
  });
}

void add_split(CLI::App& data) {
  struct Args {
    std::string in, out;
    double fraction = 0.2;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand(
      "split", "split an XMC file into DIR/train.txt and DIR/test.txt; every label of a test point stays in training");
  cmd->add_option("in", a->in, "input XMC file")->required();
  cmd->add_option("--test-fraction", a->fraction, "share of the points wanted in test")->capture_default_str()
      ->check(cli::in_range_below(0.0, 1.0));
  cmd->add_option("--seed", a->seed, "seed of the split")->capture_default_str();
  cmd->add_option("--out", a->out, "output directory")->required();
  cmd->callback([a] {
    const auto t0 = std::chrono::steady_clock::now();
    const data::Dataset d = data::XmcFile::open(a->in);
    const data::Split s = data::split(d, {.test_fraction = a->fraction, .seed = a->seed});
    std::filesystem::create_directories(a->out);
    data::XmcFile::write(s.train, a->out + "/train.txt");
    data::XmcFile::write(s.test, a->out + "/test.txt");
    fmt::print("wrote {}/train.txt ({} points) and {}/test.txt ({} points{}) in {:.1f} s\n", a->out, s.train.size(),
               a->out, s.test.size(),
               s.test.size() < s.wanted_test
                   ? fmt::format("; {} wanted, the rest hold labels too rare to leave training", s.wanted_test)
                   : "",
               seconds_since(t0));
  });
}

void add_fashion_mnist(CLI::App& data) {
  struct Args {
    std::string source = "/usr/share/datasets/fashion-mnist", out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand(
      "fashion-mnist", "convert Fashion-MNIST (IDX, from Debian's dataset-fashion-mnist) to XMC files in DIR");
  cmd->add_option("--source", a->source, "directory with train-*-ubyte.gz and t10k-*-ubyte.gz")->capture_default_str();
  cmd->add_option("--out", a->out, "output directory")->required();
  cmd->callback([a] {
    const auto t0 = std::chrono::steady_clock::now();
    data::Dataset train = data::IdxFile::open(a->source + "/train"), test = data::IdxFile::open(a->source + "/t10k");
    train.num_labels = test.num_labels = std::max(train.num_labels, test.num_labels);
    std::filesystem::create_directories(a->out);
    data::XmcFile::write(train, a->out + "/train.txt");
    data::XmcFile::write(test, a->out + "/test.txt");
    // The class names of Fashion-MNIST, line i naming label i.
    StagedFile names(a->out + "/labels.txt");
    for (const char* n : {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                          "Ankle boot"})
      names.write(fmt::format("{}\n", n));
    names.commit();
    fmt::print("wrote {0}/train.txt ({1} points), {0}/test.txt ({2} points) and {0}/labels.txt in {3:.1f} s\n"
               "train:\n{4}",
               a->out, train.size(), test.size(), seconds_since(t0), data::compute_stats(train).format("  "));
  });
}

void add_references(CLI::App& data) {
  struct Args {
    std::string train, test;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand(
      "references", "P@1/P@3/P@5 of the most-frequent-label, label-centroid and kNN rankers on an XMC train/test pair");
  cmd->add_option("train", a->train, "training XMC file")->required();
  cmd->add_option("test", a->test, "test XMC file")->required();
  cmd->callback([a] { print_references(data::XmcFile::open(a->train), data::XmcFile::open(a->test)); });
}

}  // namespace

void add_data_tools(CLI::App& data) {
  add_stats(data);
  add_shuffle(data);
  add_split(data);
  add_fashion_mnist(data);
  add_references(data);
  add_data_gcide(data);
}

}  // namespace frugal::cli
