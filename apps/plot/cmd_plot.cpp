// `frugal plot METRICS.jsonl... --out DIR`: training curves as pictures (issue 48). For every metrics
// log of `frugal train --metrics` (XMC or DLRM; each file one run, several files on one chart for
// comparison), per epoch: the training loss, the quality (P@1 and P@5, or AUC), the training
// samples/s and the bytes each sample put on the wire. Drawn by gnuplot (Debian's gnuplot-nox), as
// bench/run draws its plots: DIR/loss.png, DIR/quality.png, DIR/samples_per_s.png,
// DIR/bytes_per_sample.png, with the data gnuplot read in DIR/plot-data/ and its script in
// DIR/plot.gp (rerun `cd DIR && gnuplot plot.gp` after editing it).
//
// No user string reaches a shell or gnuplot's command language (issue 62): gnuplot is started
// without a shell (argv), in DIR, on a script that names only files this command chose
// (plot-data/runN.dat, loss.png, ...); the one user text the script holds, a run's name in the
// legend, is reduced to characters that mean nothing to gnuplot (a newline would end the string
// and start a command: `system`, `!`, backquotes, `@` macros).
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/plot/metrics_lines.h"
#include "core/check.h"
#include "core/quote.h"
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

// A text this command chose (a file name, a chart title) as a gnuplot string.
std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// A run's name (a user's file name) as a legend entry: letters, digits and a few harmless marks
// stay, anything else (control characters, quotes, backslashes, backquotes, `@`, `$`, non-ASCII
// bytes) becomes '_'. gnuplot reads the result as plain text in any string context.
std::string legend_text(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) || std::strchr(" _-+.,:()[]#%=/", c) != nullptr) && c != '\0' ? c : '_';
  }
  return out.empty() ? "_" : out;
}

// gnuplot on `script` (a file name in `dir`), started without a shell in `dir`; its output is
// kept out of frugal's messages (its words, not the user's) and the status returned.
int run_gnuplot(const std::string& dir, const std::string& script) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::string program = "gnuplot", file = script;
  char* argv[] = {program.data(), file.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc == ENOENT)
    throw Error("frugal plot draws with gnuplot, which is not installed (apt-get install gnuplot-nox)");
  FRUGAL_CHECK(rc == 0, fmt::format("frugal plot: cannot start gnuplot: {}", std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A number of an epoch line, or NaN where it is missing, not a number or not finite.
double column_value(const nlohmann::json& epoch, const char* key) {
  const auto it = epoch.find(key);
  if (it == epoch.end() || !it->is_number()) return std::nan("");
  const double v = it->get<double>();
  return std::isfinite(v) ? v : std::nan("");
}

void run_plot(const std::vector<std::string>& files, const std::string& out) {
  FRUGAL_CHECK(!out.empty(), "--out: give a folder for the PNG files");
  std::error_code ec;
  fs::create_directories(fs::path(out) / "plot-data", ec);
  FRUGAL_CHECK(!ec, fmt::format("--out {}: cannot create the folder {}: {}", quote_input(out),
                                quote_input((fs::path(out) / "plot-data").string()), std::strerror(ec.value())));
  std::vector<Run> runs;
  std::map<std::string, int> seen_names;
  for (const std::string& file : files) {
    Run r;
    r.name = fs::path(file).stem().string();
    if (seen_names[r.name]++ > 0) r.name += fmt::format(" ({})", seen_names[r.name]);
    r.epochs = read_epoch_lines(file);
    FRUGAL_CHECK(!r.epochs.empty(), fmt::format("{}: no epoch lines (a `frugal train --metrics` log?)", file));
    r.data_file = fmt::format("plot-data/run{}.dat", runs.size());  // relative to DIR, where gnuplot runs
    runs.push_back(std::move(r));
  }
  // One data file per run: the epoch, then every curve's column ("NaN" where a run lacks it).
  std::vector<const char*> columns;
  for (const Chart& c : kCharts)
    for (const Curve& curve : c.curves) columns.push_back(curve.key);
  for (const Run& r : runs) {
    StagedFile data((fs::path(out) / r.data_file).string());
    data.write(fmt::format("# epoch {}\n", fmt::join(columns, " ")));
    for (const nlohmann::json& e : r.epochs) {
      std::string row = fmt::format("{}", e["epoch"].get<uint64_t>());
      for (const char* key : columns) {
        const double v = column_value(e, key);
        row += std::isnan(v) ? std::string(" NaN") : fmt::format(" {}", v);
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
        for (const nlohmann::json& e : r.epochs) {
          const double v = column_value(e, curve.key);
          if (std::isnan(v)) continue;
          present = true;
          positive = positive && v > 0;
        }
        if (!present) continue;
        size_t column = 2;
        while (std::string(columns[column - 2]) != curve.key) ++column;
        const std::string name = legend_text(r.name);
        const std::string title = *curve.label ? fmt::format("{} {}", name, curve.label) : name;
        plots.push_back(fmt::format("{} using 1:{} with linespoints title {}", quoted(r.data_file), column, quoted(title)));
      }
    if (plots.empty()) continue;
    const std::string png = std::string(chart.file) + ".png";
    script += fmt::format("set output {}\nset title {}\nset ylabel {}\n{}plot {}\n", quoted(png), quoted(chart.title),
                          quoted(chart.ylabel), chart.log_y && positive ? "set logscale y\n" : "unset logscale y\n",
                          fmt::join(plots, ", \\\n     "));
    written.push_back((fs::path(out) / png).string());
  }
  const std::string script_file = (fs::path(out) / "plot.gp").string();
  StagedFile gp(script_file);
  gp.write(script);
  gp.commit();
  for (const std::string& png : written) {  // an earlier run's picture must not pass for this one's
    std::error_code ignored;
    fs::remove(png, ignored);
  }
  const int rc = run_gnuplot(out, "plot.gp");
  FRUGAL_CHECK(rc == 0, fmt::format("frugal plot: gnuplot could not draw {} (exit status {}); `cd {} && gnuplot "
                                    "plot.gp` shows why", script_file, rc, quote_input(out)));
  // gnuplot may say nothing and exit 0 when a picture could not be written (a full disk): each one
  // must be there, and more than empty.
  for (const std::string& png : written) {
    std::error_code ec;
    const auto size = fs::file_size(png, ec);
    FRUGAL_CHECK(!ec && size > 0, fmt::format("frugal plot: {} was not written (a full disk, or a folder that is "
                                              "not writable?)", png));
  }
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
