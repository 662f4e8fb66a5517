// `frugal bench read FILE`: how long reading a data set whole takes (what a run does at start-up),
// the bytes it read and the peak memory: text against its packed form (`frugal data pack`) in
// bench/data/run.sh. Prints one JSON line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/data_file_option.h"
#include "core/data/ctr_reader.h"
#include "core/data/data_format.h"
#include "core/data/packed_file.h"
#include "train/metrics_log.h"
#include "train/run/train_inputs.h"

namespace frugal::cli {
namespace {

// The bytes this process has read from storage or the page cache (/proc/self/io rchar).
uint64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}

}  // namespace

void add_bench_read_command(CLI::App& bench) {
  auto a = std::make_shared<DataFileArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "read", "time reading a data set whole, as a run starts (text or packed): seconds, bytes read, peak memory");
  add_data_file(cmd, *a, "file", "XMC file, IDX prefix with --format idx, Criteo-format file, or a packed file");
  cmd->callback([a] {
    const data::DataFormat f = a->resolved();
    const uint64_t read0 = bytes_read_so_far();
    const auto t0 = std::chrono::steady_clock::now();
    size_t points = 0;
    if (f == data::DataFormat::criteo)
      points = data::load_ctr(a->file).size;
    else
      points = run::open_input(f, a->file).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const nlohmann::json out = {{"file", a->file},
                                {"packed", data::is_packed_file(a->file)},
                                {"points", points},
                                {"seconds", seconds},
                                {"bytes_read", bytes_read_so_far() - read0},
                                {"peak_rss_bytes", train::peak_rss_bytes()}};
    fmt::print("{}\n", out.dump());
  });
}

}  // namespace frugal::cli
