// `frugal data gcide --out DIR`: the GCIDE reverse-dictionary XMC set (core/data/gcide_builder.h) from
// Debian's dict-gcide, written as DIR/train.txt, DIR/test.txt, DIR/features.txt (line i: the word
// of feature i) and DIR/labels.txt (line i: the headword of label i), with its statistics and the
// P@1/P@3/P@5 of the reference rankers a trained model must beat (most frequent, label centroid,
// kNN; print_references, which `frugal data references` shares).
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"
#include "core/data/dataset_stats.h"
#include "core/data/dictd_file.h"
#include "core/staged_file.h"
#include "core/data/gcide_builder.h"
#include "core/data/reference_rankers.h"
#include "core/data/xmc_file.h"

namespace frugal::cli {
namespace {

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  StagedFile out(path);  // renamed into place once complete
  for (const std::string& l : lines) {
    out.write(l);
    out.write("\n");
  }
  out.commit();
}

}  // namespace

void print_references(const data::Dataset& train, const data::Dataset& test) {
  const std::vector<size_t> ks{1, 3, 5};
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const auto t0 = std::chrono::steady_clock::now();
  const auto freq = data::most_frequent_precision(train, test, ks);
  const auto centroid = data::label_centroid_precision(train, test, ks);
  const double simple_seconds = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  const auto knn = data::knn_precision(train, test, ks, 10);
  const double knn_seconds = seconds_since(t1);
  fmt::print("references on the test set ({:.1f} s):\n", simple_seconds + knn_seconds);
  const auto line = [](const char* name, const std::map<size_t, double>& p) {
    fmt::print("  {:<25}P@1 {:.4f}  P@3 {:.4f}  P@5 {:.4f}", name, p.at(1), p.at(3), p.at(5));
  };
  line("most frequent label", freq);
  fmt::print("\n");
  line("label centroid (cosine)", centroid);
  fmt::print("\n");
  line("kNN (cosine, 10 voters)", knn);
  fmt::print("  ({:.1f} s)\n", knn_seconds);
}

void add_data_gcide(CLI::App& data) {
  struct Args {
    std::string dict = "/usr/share/dictd/gcide.dict.dz", index, out;
    data::GcideOptions options;
    bool references = true;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand(
      "gcide", "build the GCIDE reverse-dictionary XMC set (definition words -> headword) from Debian's dict-gcide");
  cmd->add_option("--dict", a->dict, "the dictd text (gzip/dictzip or plain)")->capture_default_str();
  cmd->add_option("--index", a->index, "the dictd index (default: the --dict path with .index for .dict[.dz])");
  cmd->add_option("--min-count", a->options.min_count, "definitions a word must appear in to be a feature")
      ->capture_default_str();
  cmd->add_option("--max-df", a->options.max_df, "largest share of definitions a feature may appear in")
      ->capture_default_str();
  cmd->add_option("--min-label-points", a->options.min_label_points,
                  "keep only headwords with at least this many definitions (1: all)")
      ->capture_default_str();
  cmd->add_option("--test-fraction", a->options.test_fraction, "share of the definitions wanted in test")
      ->capture_default_str()->check(cli::in_range_below(0.0, 1.0));
  cmd->add_option("--seed", a->options.seed, "seed of the split")->capture_default_str();
  cmd->add_option("--out", a->out, "output directory")->required();
  cmd->add_flag("!--no-references", a->references, "skip the reference rankers");
  cmd->callback([a] {
    const auto t0 = std::chrono::steady_clock::now();
    std::string index = a->index;
    if (index.empty()) {
      index = a->dict;
      for (const char* ext : {".dict.dz", ".dict"})
        if (index.ends_with(ext)) {
          index = index.substr(0, index.size() - std::string(ext).size()) + ".index";
          break;
        }
      FRUGAL_CHECK(index != a->dict, fmt::format("{}: name the index with --index", a->dict));
    }
    const data::DictdFile dict = data::DictdFile::open(index, a->dict);
    data::GcideSet set;
    with_flag_names({{"GcideOptions::min_count", "--min-count"}, {"GcideOptions::max_df", "--max-df"}}, "gcide: ",
                    [&] { set = data::build_gcide(dict, a->options); });
    std::filesystem::create_directories(a->out);
    data::XmcFile::write(set.train, a->out + "/train.txt");
    data::XmcFile::write(set.test, a->out + "/test.txt");
    write_lines(a->out + "/features.txt", set.feature_names);
    write_lines(a->out + "/labels.txt", set.label_names);
    fmt::print("{}: {} index entries, {} articles ({} without a recognizable headword), {} definitions ({} left "
               "without features, {} of headwords with fewer than {} definitions)\n",
               a->dict, dict.entries().size(), set.articles, set.articles_without_headword, set.definitions,
               set.definitions_without_features, set.definitions_of_rare_labels, a->options.min_label_points);
    fmt::print("wrote {0}/train.txt ({1} points), {0}/test.txt ({2} points), {0}/features.txt, {0}/labels.txt in "
               "{3:.1f} s\n",
               a->out, set.train.size(), set.test.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    fmt::print("all points:\n{}", data::compute_stats(set.all).format("  "));
    fmt::print("test: {} points, {:.2f} nonzeros and {:.2f} labels per point\n", set.test.size(),
               set.test.average_nonzeros(), set.test.average_labels());
    if (a->references) print_references(set.train, set.test);
  });
}

}  // namespace frugal::cli
