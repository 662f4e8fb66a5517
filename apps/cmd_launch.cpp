// `frugal launch -n N [--transport zmq|mpi] [--bandwidth RATE] [--max-restarts K [--min-ranks M]]
// -- CMD ARGS...`: N local ranks of a run, optionally each in its own network namespace behind a
// rate-capped link, optionally restarted as a whole when a rank dies.
// `frugal launch --cleanup-stale`: removes the namespaces of launchers that were SIGKILLed.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/launcher.h"
#include "apps/netns_cluster.h"
#include "comm/environment.h"

namespace frugal::cli {

void add_launch_command(CLI::App& app) {
  auto spec = std::make_shared<LaunchSpec>();
  auto key = std::make_shared<std::string>();
  auto timeout = std::make_shared<std::string>();
  auto cleanup_stale = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "launch", "start N ranks of a program on this machine, output prefixed by rank");
  // -n and the command are checked in the callback: --cleanup-stale needs neither.
  CLI::Option* ranks_opt =
      cmd->add_option("-n,--ranks", spec->ranks, "number of ranks")->check(CLI::PositiveNumber);
  add_choice(cmd, "--transport", spec->transport, {comm::Transport::zmq, comm::Transport::mpi},
             "zmq (default) or mpi (runs mpirun)")
      ->default_str("");  // the help text names the default
  cmd->add_option("--coordinator", spec->coordinator, "host:port for rank 0 (default: a free port "
                  "on 127.0.0.1)");
  cmd->add_option("--cluster-key", *key, "CURVE key file made by `frugal keygen`")->check(CLI::ExistingFile);
  cmd->add_option("--comm-timeout", *timeout, "seconds of silence before a rank is declared dead");
  cmd->add_option("--grace", spec->grace_seconds, "seconds between SIGTERM and SIGKILL when a rank fails");
  cmd->add_option("--max-restarts", spec->max_restarts,
                  "when a rank fails, stop the others and restart the whole job, at most N times; a restart "
                  "resumes from the command's --checkpoint DIR (the newest intact checkpoint) once it holds one")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-ranks", spec->min_ranks,
                  "with --max-restarts: each restart runs on one rank fewer (the failed rank's place is left out, "
                  "as if its node were lost), down to M ranks; --resume reslices the checkpoint onto them (the "
                  "command must not fix the rank count, as --grid or a --slice-weights list do). 0: all ranks")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--bandwidth", spec->bandwidth,
                  "emulate a cluster on this machine: every rank in its own network namespace, each "
                  "link capped at RATE both ways (e.g. 100mbit, 1gbit, 10gbit; needs root)");
  cmd->add_flag("--cleanup-stale", *cleanup_stale,
                "remove the network namespaces (and stop the ranks) left by --bandwidth launchers "
                "that no longer run, then exit");
  cmd->add_option("command", spec->command, "the program and its arguments (after --)");
  cmd->callback([spec, key, timeout, cleanup_stale, ranks_opt] {
    if (*cleanup_stale) {
      try {
        const auto removed = NetnsCluster::cleanup_stale();
        for (const auto& name : removed) fmt::print(stderr, "frugal launch: removed namespace {}\n", name);
        if (removed.empty()) fmt::print(stderr, "frugal launch: no stale namespaces\n");
        std::exit(0);
      } catch (const std::exception& e) {
        fmt::print(stderr, "frugal launch: {}\n", e.what());
        std::exit(2);
      }
    }
    if (ranks_opt->count() == 0 || spec->command.empty()) {
      fmt::print(stderr, "frugal launch: usage: frugal launch -n N [options] -- CMD ARGS... "
                         "(or frugal launch --cleanup-stale)\n");
      std::exit(2);
    }
    if (!key->empty()) spec->env[std::string(comm::env::kClusterKey)] = *key;
    if (!timeout->empty()) spec->env[std::string(comm::env::kCommTimeout)] = *timeout;
    try {
      std::exit(launch(*spec));
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal launch: {}\n", e.what());
      std::exit(2);
    }
  });
}

}  // namespace frugal::cli
