// `frugal launch -n N [--transport zmq|mpi] -- CMD ARGS...`: N local ranks of a run.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/launcher.h"

namespace frugal::cli {

void add_launch_command(CLI::App& app) {
  auto spec = std::make_shared<LaunchSpec>();
  auto key = std::make_shared<std::string>();
  auto timeout = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "start N ranks of a program on this machine, output prefixed by rank");
  cmd->add_option("-n,--ranks", spec->ranks, "number of ranks")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--transport", spec->transport, "zmq (default) or mpi (runs mpirun)")
      ->check(CLI::IsMember({"zmq", "mpi"}));
  cmd->add_option("--coordinator", spec->coordinator, "host:port for rank 0 (default: a free port "
                  "on 127.0.0.1)");
  cmd->add_option("--cluster-key", *key, "CURVE key file made by `frugal keygen`")->check(CLI::ExistingFile);
  cmd->add_option("--comm-timeout", *timeout, "seconds of silence before a rank is declared dead");
  cmd->add_option("--grace", spec->grace_seconds, "seconds between SIGTERM and SIGKILL when a rank fails");
  cmd->add_option("command", spec->command, "the program and its arguments (after --)")->required();
  cmd->callback([spec, key, timeout] {
    if (!key->empty()) spec->env["FRUGAL_CLUSTER_KEY"] = *key;
    if (!timeout->empty()) spec->env["FRUGAL_COMM_TIMEOUT"] = *timeout;
    try {
      std::exit(launch(*spec));
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal launch: {}\n", e.what());
      std::exit(2);
    }
  });
}

}  // namespace frugal::cli
