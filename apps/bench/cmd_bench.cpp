// `frugal bench roofline`: what this machine's cores and memory reach (a built-in probe), and, with
// --metrics, how close each phase of a training run's steps came to it (core/roofline.h), from the
// profile `frugal train` writes into every epoch line of its metrics file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/plot/metrics_lines.h"
#include "train/run/step_profile_json.h"
#include "core/check.h"
#include "core/host_memory.h"
#include "core/roofline.h"
#include "core/staged_file.h"
#include "kernels/machine_probe.h"

namespace frugal::cli {

using namespace frugal::run;  // the run API's pieces these commands share with training
namespace {

// The probes' sizes: beyond these no machine runs them (and MiB << 20 would overflow 64 bits).
constexpr size_t kMaxThreads = 4096;
constexpr size_t kMaxMib = size_t{1} << 24;  // 16 TiB
constexpr size_t kMaxRowBytes = size_t{1} << 30;
constexpr int kMaxRepeats = 1000;

struct RooflineArgs {
  size_t threads = 1;
  std::string metrics;
  size_t epoch = 0;  // 0: the last epoch line
  std::string json;
  size_t array_mib = 256, table_mib = 1024, row_bytes = 512;
  int repeats = 5;
};

// The epoch line `epoch` (0: the last) of a metrics file that has a profile.
nlohmann::json epoch_line(const std::string& path, size_t epoch) {
  std::optional<nlohmann::json> found;
  for_each_metrics_line(path, [&](nlohmann::json& j) {
    if (j.value("event", "") != "epoch" || !j.contains("profile")) return;
    if (epoch == 0 || j.value("epoch", size_t{0}) == epoch) found = j;
  });
  FRUGAL_CHECK(found.has_value(), epoch == 0 ? fmt::format("{}: no epoch line with a profile", path)
                                             : fmt::format("{}: no epoch {} line with a profile", path, epoch));
  return *found;
}

std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.0f} ", v);
}

void run_roofline(const RooflineArgs& a) {
  // The probes' arrays and table, allocated before they are timed.
  const double need = 3.0 * static_cast<double>(a.array_mib << 20) + static_cast<double>(a.table_mib << 20);
  if (const std::optional<uint64_t> available = host_memory_available(); available && need > static_cast<double>(*available))
    throw Error(fmt::format("--array-mib {} (three arrays) and --table-mib {} need {:.0f} MiB, more than the {:.0f} MiB "
                            "this machine has available",
                            a.array_mib, a.table_mib, need / 1048576.0, static_cast<double>(*available) / 1048576.0));
  FRUGAL_CHECK(a.row_bytes <= (a.table_mib << 20),
               fmt::format("--row-bytes {} is more than the table of --table-mib {} holds", a.row_bytes, a.table_mib));
  const kernels::ProbeResult probe = kernels::probe_machine(
      {.threads = a.threads, .array_bytes = a.array_mib << 20, .table_bytes = a.table_mib << 20,
       .row_bytes = a.row_bytes, .repeats = a.repeats});
  fmt::print("machine, {} thread{} ({}): {:.1f} GFLOP/s (FMA peak), {:.1f} GB/s streaming, {:.1f} GB/s gathering "
             "random {}-byte rows\n",
             a.threads, a.threads == 1 ? "" : "s", probe.isa, probe.flops_per_s / 1e9, probe.stream_bytes_per_s / 1e9,
             probe.gather_bytes_per_s / 1e9, a.row_bytes);
  nlohmann::json out = {{"threads", a.threads}, {"isa", probe.isa}, {"flops_per_s", probe.flops_per_s},
                        {"stream_bytes_per_s", probe.stream_bytes_per_s},
                        {"gather_bytes_per_s", probe.gather_bytes_per_s}, {"row_bytes", a.row_bytes}};
  if (!a.metrics.empty()) {
    const nlohmann::json line = epoch_line(a.metrics, a.epoch);
    size_t samples = 0;
    const profile::StepProfile p = profile_from_json(line["profile"], samples);
    const profile::Roofline r = profile::roofline(
        p, samples, {.flops_per_s = probe.flops_per_s, .stream_bytes_per_s = probe.stream_bytes_per_s,
                     .gather_bytes_per_s = probe.gather_bytes_per_s});
    const size_t epoch = line.value("epoch", size_t{0});
    fmt::print("{} epoch {}: {} samples, {:.1f} us of step time per sample ({:.0f} samples/s over the steps)\n",
               a.metrics, epoch, samples, r.seconds * 1e6, r.seconds > 0 ? 1.0 / r.seconds : 0.0);
    fmt::print("{:<16} {:>10} {:>6} {:>12} {:>11} {:>9} {:>8} {:>16} {:>8}\n", "phase", "us/sample", "share",
               "flop/sample", "B/sample", "GFLOP/s", "GB/s", "bound", "of roof");
    nlohmann::json phases = nlohmann::json::array();
    for (const profile::RooflinePhase& ph : r.phases) {
      const std::string name(profile::phase_name(ph.phase));
      fmt::print("{:<16} {:>10.2f} {:>5.1f}% {:>12} {:>11} {:>9.2f} {:>8.2f} {:>16} {:>8}\n", name, ph.seconds * 1e6,
                 r.seconds > 0 ? 100.0 * ph.seconds / r.seconds : 0.0, si(ph.flops), si(ph.bytes),
                 ph.flops_per_s() / 1e9, ph.bytes_per_s() / 1e9, ph.bound.empty() ? "-" : ph.bound,
                 ph.bound.empty() ? "-" : fmt::format("{:.0f}%", 100.0 * ph.fraction()));
      phases.push_back({{"phase", name}, {"seconds_per_sample", ph.seconds}, {"flops_per_sample", ph.flops},
                        {"bytes_per_sample", ph.bytes}, {"gathered_bytes_per_sample", ph.gathered_bytes},
                        {"bound", ph.bound}, {"roof_seconds_per_sample", ph.roof_seconds},
                        {"fraction_of_roof", ph.fraction()}});
    }
    fmt::print("step: the roofline allows {:.1f} us/sample, the step took {:.1f}: {:.0f}% of the roof "
               "({:.0f}% of the time is in phases with counted work)\n",
               r.roof_seconds * 1e6, r.seconds * 1e6, 100.0 * r.fraction(),
               r.seconds > 0 ? 100.0 * r.counted_seconds / r.seconds : 0.0);
    out["metrics"] = a.metrics;
    out["epoch"] = epoch;
    out["samples"] = samples;
    out["step_seconds_per_sample"] = r.seconds;
    out["roof_seconds_per_sample"] = r.roof_seconds;
    out["fraction_of_roof"] = r.fraction();
    out["phases"] = phases;
  }
  if (!a.json.empty()) {  // every write checked; a failed one leaves no partial file (core/staged_file.h)
    StagedFile f(a.json);
    f.write(out.dump(2) + "\n");
    f.commit();
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "measure this machine (roofline), its transports (comm) or reading data (read)");
  bench->require_subcommand(1);
  add_bench_comm_command(*bench);
  add_bench_read_command(*bench);
  auto a = std::make_shared<RooflineArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "roofline", "probe this machine's FMA rate, streaming and row-gather bandwidth; with --metrics, how close "
                  "each phase of a training run's steps came to them");
  cmd->add_option("--threads", a->threads, "threads the probes run (use the run's --threads)")
      ->capture_default_str()->check(cli::in_range(size_t{1}, kMaxThreads));
  cmd->add_option("--metrics", a->metrics, "a `frugal train --metrics` file: its profile is analyzed")
      ->check(CLI::ExistingFile);
  cmd->add_option("--epoch", a->epoch, "the epoch line to analyze (0: the last)")->capture_default_str();
  cmd->add_option("--json", a->json, "also write the figures to this JSON file");
  cmd->add_option("--array-mib", a->array_mib, "streaming probe: MiB per array (three arrays)")
      ->capture_default_str()->check(cli::in_range(size_t{1}, kMaxMib));
  cmd->add_option("--table-mib", a->table_mib, "gather probe: MiB of the table rows are read from")
      ->capture_default_str()->check(cli::in_range(size_t{1}, kMaxMib));
  cmd->add_option("--row-bytes", a->row_bytes, "gather probe: bytes per row (hidden width x 4)")
      ->capture_default_str()->check(cli::in_range(size_t{4}, kMaxRowBytes));
  cmd->add_option("--repeats", a->repeats, "timed runs per probe (the best counts)")
      ->capture_default_str()->check(cli::in_range(1, kMaxRepeats));
  cmd->callback([a] {
    try {
      run_roofline(*a);
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal bench roofline: {}\n", e.what());
      std::exit(1);
    }
  });
}

}  // namespace frugal::cli
