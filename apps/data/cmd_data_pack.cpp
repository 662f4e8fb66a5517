// `frugal data pack IN OUT`: converts a data set once into the packed, checksummed form
// (core/data/packed_file.h) that every command reads without parsing. XMC text and Criteo logs (plain
// or gzip) stream through (memory holds one block); an IDX set is read whole (they are small).
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/data_file_option.h"
#include "core/check.h"
#include "core/data/data_format.h"
#include "core/data/packed_file.h"
#include "train/run/train_inputs.h"

namespace frugal::cli {

void add_data_pack(CLI::App& data) {
  struct Args : DataFileArgs {
    std::string out;
    uint64_t block_points = data::kPackedBlockPoints;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = data.add_subcommand(
      "pack", "convert a data set into the packed binary form every command reads without parsing (docs/data.md)");
  add_data_file(cmd, *a, "in", "XMC file, IDX prefix with --format idx, or Criteo-format file (.tsv[.gz])");
  cmd->add_option("out", a->out, "the packed file to write")->required();
  cmd->add_option("--block-points", a->block_points,
                  "points a block holds: the unit of checksums, reads and (for a streamed run) each rank's shard")
      ->capture_default_str()
      ->check(cli::in_range(uint64_t{1}, uint64_t{1} << 24));
  cmd->callback([a] {
    const auto t0 = std::chrono::steady_clock::now();
    FRUGAL_CHECK(!data::is_packed_file(a->file), fmt::format("{}: already packed", a->file));
    const data::DataFormat f = a->resolved();
    std::error_code ec;
    FRUGAL_CHECK(!std::filesystem::exists(a->out) || !std::filesystem::equivalent(a->file, a->out, ec),
                 fmt::format("{}: output and input are the same file", a->out));
    data::PackedHeader h;
    if (f == data::DataFormat::criteo)
      h = data::pack_ctr_file(a->file, a->out, a->block_points);
    else if (f == data::DataFormat::idx)
      h = data::pack_dataset(run::open_input(f, a->file), a->out, a->block_points);
    else
      h = data::pack_xmc_file(a->file, a->out, a->block_points);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto bytes = std::filesystem::file_size(a->out);
    if (h.kind == data::PackedKind::clicks)
      fmt::print("wrote {} ({} click-log samples, {} blocks, {:.1f} MB) in {:.1f} s\n", a->out, h.points, h.blocks(),
                 static_cast<double>(bytes) / 1e6, seconds);
    else
      fmt::print("wrote {} ({} points, {} features, {} labels, {} blocks, {:.1f} MB) in {:.1f} s\n", a->out, h.points,
                 h.features, h.labels, h.blocks(), static_cast<double>(bytes) / 1e6, seconds);
  });
}

}  // namespace frugal::cli
