// `frugal keygen FILE` (or -o FILE): a new cluster key (CURVE key pair) for authenticated, encrypted runs.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include <fmt/format.h>

#include "apps/commands.h"
#include "comm/cluster_key.h"

namespace frugal::cli {

void add_keygen_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("keygen", "write a new cluster key (give the same file to "
                                     "every rank with --cluster-key)");
  cmd->add_option("file,-o,--output", *path, "key file to create (mode 0600; never overwritten)")->required();
  cmd->callback([path] {
    try {
      const auto key = comm::generate_cluster_key();
      comm::save_cluster_key(key, *path);
      fmt::print("wrote cluster key {} (public key {})\n", *path, key.public_z85);
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal keygen: {}\n", e.what());
      std::exit(1);
    }
  });
}

}  // namespace frugal::cli
