// `frugal plot METRICS.jsonl... --out DIR`: training curves as pictures (issue 48). For every metrics
// log of `frugal train --metrics` (XMC or DLRM; each file one run, several files on one chart for
// comparison), per epoch: the training loss, the quality (P@1 and P@5, or AUC), the training
// samples/s and the bytes each sample put on the wire. Drawn by gnuplot (Debian's gnuplot-nox), as
// bench/run draws its plots: DIR/loss.png, DIR/quality.png, DIR/samples_per_s.png,
// DIR/bytes_per_sample.png, with the data gnuplot read in DIR/plot-data/ and its script in
// DIR/plot.gp (rerun `gnuplot DIR/plot.gp` after editing it).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/metrics_lines.h"
#include "core/check.h"
#include "core/staged_file.h"

namespace frugal::cli {
namespace {
namespace fs = std::filesystem;

// One series of one chart: a column of the epoch lines.
struct Curve {
  const char* key;    // in the epoch line
  const char* label;  // in the legend, after the run's name
};

struct Chart {
  const char* file;  // DIR/<file>.png
  const char* title;
  const char* ylabel;
  std::vector<Curve> curves;
  bool log_y = false;
};

const std::vector<Chart> kCharts = {
    {"loss", "training loss", "loss", {{"loss", ""}}},
    {"quality", "test quality", "P@k / AUC", {{"p@1", "P@1"}, {"p@5", "P@5"}, {"auc", "AUC"}}},
    {"samples_per_s", "training throughput", "samples/s", {{"train_samples_per_s", ""}}},
    {"bytes_per_sample", "wire bytes sent per sample (rank 0)", "bytes/sample", {{"bytes_sent_per_sample", ""}}, true},
};

// The epoch lines of one metrics log (rank 0's: a run's other ranks write their own files).
struct Run {
  std::string name, data_file;
  std::vector<nlohmann::json> epochs;
};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

void run_plot(const std::vector<std::string>& files, const std::string& out) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    throw Error("frugal plot draws with gnuplot, which is not installed (apt-get install gnuplot-nox)");
  fs::create_directories(fs::path(out) / "plot-data");
  std::vector<Run> runs;
  std::map<std::string, int> seen_names;
  for (const std::string& file : files) {
    Run r;
    r.name = fs::path(file).stem().string();
    if (seen_names[r.name]++ > 0) r.name += fmt::format(" ({})", seen_names[r.name]);
    for_each_metrics_line(file, [&](nlohmann::json& line) {
      if (line.is_object() && line.value("event", "") == "epoch" && line.value("rank", 0) == 0)
        r.epochs.push_back(std::move(line));
    });
    FRUGAL_CHECK(!r.epochs.empty(), fmt::format("{}: no epoch lines (a `frugal train --metrics` log?)", file));
    r.data_file = (fs::path(out) / "plot-data" / fmt::format("run{}.dat", runs.size())).string();
    runs.push_back(std::move(r));
  }
  // One data file per run: the epoch, then every curve's column ("NaN" where a run lacks it).
  std::vector<const char*> columns;
  for (const Chart& c : kCharts)
    for (const Curve& curve : c.curves) columns.push_back(curve.key);
  for (const Run& r : runs) {
    StagedFile data(r.data_file);
    data.write(fmt::format("# epoch {}\n", fmt::join(columns, " ")));
    for (const nlohmann::json& e : r.epochs) {
      std::string row = fmt::format("{}", e.value("epoch", 0));
      for (const char* key : columns) {
        const auto it = e.find(key);
        row += it != e.end() && it->is_number() ? fmt::format(" {}", it->get<double>()) : " NaN";
      }
      data.write(row + "\n");
    }
    data.commit();
  }
  std::string script = "set terminal pngcairo size 900,540 noenhanced\nset key outside right\nset grid\n"
                       "set xlabel \"epoch\"\nset datafile missing \"NaN\"\n";
  size_t most_epochs = 0;
  for (const Run& r : runs) most_epochs = std::max(most_epochs, r.epochs.size());
  if (most_epochs <= 20) script += "set xtics 1\n";  // whole epochs, not 1.2, 1.4, ...
  std::vector<std::string> written;
  for (const Chart& chart : kCharts) {
    std::vector<std::string> plots;
    bool positive = true;  // a log scale needs every value above 0 (one rank sends 0 bytes)
    for (const Run& r : runs)
      for (const Curve& curve : chart.curves) {
        // Only the columns some epoch of the run has (AUC for DLRM, P@k for XMC).
        bool present = false;
        for (const nlohmann::json& e : r.epochs)
          if (e.contains(curve.key) && e[curve.key].is_number()) {
            present = true;
            positive = positive && e[curve.key].get<double>() > 0;
          }
        if (!present) continue;
        size_t column = 2;
        while (std::string(columns[column - 2]) != curve.key) ++column;
        const std::string title = *curve.label ? fmt::format("{} {}", r.name, curve.label) : r.name;
        plots.push_back(fmt::format("{} using 1:{} with linespoints title {}", quoted(r.data_file), column, quoted(title)));
      }
    if (plots.empty()) continue;
    const std::string png = (fs::path(out) / (std::string(chart.file) + ".png")).string();
    script += fmt::format("set output {}\nset title {}\nset ylabel {}\n{}plot {}\n", quoted(png), quoted(chart.title),
                          quoted(chart.ylabel), chart.log_y && positive ? "set logscale y\n" : "unset logscale y\n",
                          fmt::join(plots, ", \\\n     "));
    written.push_back(png);
  }
  const std::string script_file = (fs::path(out) / "plot.gp").string();
  StagedFile gp(script_file);
  gp.write(script);
  gp.commit();
  const std::string command = fmt::format("gnuplot {} 2>&1", quoted(script_file));
  std::FILE* p = ::popen(command.c_str(), "r");
  FRUGAL_CHECK(p != nullptr, "cannot start gnuplot");
  std::string said;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) said += buf;
  const int rc = ::pclose(p);
  FRUGAL_CHECK(rc == 0, fmt::format("gnuplot failed on {}: {}", script_file, said));
  for (const std::string& png : written) fmt::print("wrote {}\n", png);
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "draw training curves (loss, P@k or AUC, samples/s, bytes per sample "
                                             "per epoch) of `frugal train --metrics` logs as PNG files, several runs "
                                             "on one chart");
  cmd->add_option("metrics", *files, "METRICS.jsonl files (one run each; rank 0's lines are drawn)")->required();
  cmd->add_option("--out", *out, "folder for the PNG files (created if needed)")->required();
  cmd->callback([files, out] { run_plot(*files, *out); });
}

}  // namespace frugal::cli
