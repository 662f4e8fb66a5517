// `frugal launch -n N [--transport zmq|mpi] [--bandwidth RATE] [--max-restarts K [--min-ranks M]] [--no-run-token]
// -- CMD ARGS...`: N local ranks of a run, optionally each in its own network namespace behind a
// rate-capped link, optionally restarted as a whole when a rank dies.
// `frugal launch --hostfile FILE [--ssh CMD] -n N -- CMD ARGS...`: the ranks on the hosts of FILE,
// over ssh (apps/launch/hostfile.h).
// `frugal launch --cleanup-stale`: removes the namespaces of launchers that were SIGKILLed.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/launch/launcher.h"
#include "apps/launch/netns_cluster.h"
#include "comm/environment.h"

namespace frugal::cli {
namespace {

// Ranks on one machine (or a hostfile's) are processes, each with its sockets: beyond this a launch
// forks until the system refuses.
constexpr int kMaxRanks = 4096;
constexpr int kMaxRestarts = 1000;

// Why `program` cannot be run here (empty: it can): a path that is no executable file, or a name
// found on no folder of PATH.
std::string missing_program(const std::string& program) {
  namespace fs = std::filesystem;
  const auto runnable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.empty()) return "the command after -- is empty: give the program to run";
  if (program.find('/') != std::string::npos)
    return runnable(program) ? std::string() : fmt::format("{}: no such program (not an executable file)", program);
  const char* path = std::getenv("PATH");
  std::string folders = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= folders.size();) {
    const size_t end = std::min(folders.find(':', start), folders.size());
    const std::string folder = folders.substr(start, end - start);
    if (runnable(fs::path(folder.empty() ? "." : folder) / program)) return {};
    start = end + 1;
  }
  return fmt::format("{}: no such program on PATH (give its path, or install it)", program);
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto spec = std::make_shared<LaunchSpec>();
  auto key = std::make_shared<std::string>();
  auto timeout = std::make_shared<std::string>();
  auto cleanup_stale = std::make_shared<bool>(false);
  auto exported = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "start N ranks of a program on this machine, output prefixed by rank");
  // -n and the command are checked in the callback: --cleanup-stale needs neither.
  CLI::Option* ranks_opt =
      cmd->add_option("-n,--ranks", spec->ranks, "number of ranks")->check(cli::in_range(1, kMaxRanks));
  add_choice(cmd, "--transport", spec->transport, {comm::Transport::zmq, comm::Transport::mpi},
             "zmq (default) or mpi (runs mpirun)")
      ->default_str("");  // the help text names the default
  cmd->add_option("--coordinator", spec->coordinator, "host:port for rank 0 (default: a free port "
                  "on 127.0.0.1)");
  cmd->add_option("--cluster-key", *key, "CURVE key file made by `frugal keygen`")->check(CLI::ExistingFile);
  cmd->add_flag("--no-run-token", [spec](int64_t) { spec->run_token = false; },
                "start ZeroMQ ranks without a run token (without a cluster key each launch makes one, so that only "
                "its ranks can connect to each other): any process that reaches their ports can then connect");
  cmd->add_option("--comm-timeout", *timeout, "seconds of silence before a rank is declared dead")
      ->check(cli::number_check<double>("> 0", "positive", [](const std::string& given, double v) {
        // What the ranks accept (comm/init.cpp): refused here, before any of them starts.
        return v > 0 && v < 1e9 ? std::string() : given + " is not a number of seconds above 0 and below 1e9";
      }));
  cmd->add_option("--grace", spec->grace_seconds, "seconds between SIGTERM and SIGKILL when a rank fails")
      ->check(cli::in_range(0, 3600));
  cmd->add_option("--max-restarts", spec->max_restarts,
                  "when a rank fails, stop the others and restart the whole job, at most N times; a restart "
                  "resumes from the command's --checkpoint DIR (the newest intact checkpoint) once it holds one")
      ->capture_default_str()->check(cli::in_range(0, kMaxRestarts));
  cmd->add_option("--min-ranks", spec->min_ranks,
                  "with --max-restarts: each restart runs on one rank fewer (the failed rank's place is left out, "
                  "as if its node were lost), down to M ranks; --resume reslices the checkpoint onto them (the "
                  "command must not fix the rank count, as --grid or a --slice-weights list do). 0: all ranks")
      ->capture_default_str()->check(cli::in_range(0, kMaxRanks));
  cmd->add_option("--bandwidth", spec->bandwidth,
                  "emulate a cluster on this machine: every rank in its own network namespace, each "
                  "link capped at RATE both ways (e.g. 100mbit, 1gbit, 10gbit; needs root)");
  cmd->add_option("--hostfile", spec->hostfile,
                  "run the ranks on other hosts over ssh: FILE lists one host per line, `host` or `host slots=K` "
                  "(# comments); ranks fill the slots in order; the coordinator is the first host, port 29500")
      ->check(CLI::ExistingFile);
  CLI::Option* ssh_opt = cmd->add_option("--ssh", spec->ssh,
                                         "with --hostfile: the command that runs a command on a host, e.g. "
                                         "\"ssh -i KEY -p 2222\" (ssh gets -o BatchMode=yes added)")
                             ->capture_default_str();
  cmd->add_option("-x,--env", *exported,
                  "NAME=VALUE, or NAME to pass on the launcher's value: set for every rank (over ssh the ranks "
                  "inherit nothing else but the launcher's FRUGAL_* variables); repeatable")
      ->allow_extra_args(false);  // one value per -x: a list would swallow the `--` before the command
  cmd->add_flag("--cleanup-stale", *cleanup_stale,
                "remove the network namespaces (and stop the ranks) left by --bandwidth launchers "
                "that no longer run, then exit");
  cmd->add_option("command", spec->command, "the program and its arguments (after --)");
  cmd->callback([spec, key, timeout, cleanup_stale, ranks_opt, ssh_opt, exported] {
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
    if (ssh_opt->count() > 0 && spec->hostfile.empty()) {
      fmt::print(stderr, "frugal launch: --ssh needs --hostfile (local ranks are started without ssh)\n");
      std::exit(2);
    }
    for (const std::string& item : *exported) {
      const size_t eq = item.find('=');
      const std::string name = item.substr(0, eq);
      const char* value = eq == std::string::npos ? std::getenv(name.c_str()) : nullptr;
      if (name.empty() || (eq == std::string::npos && value == nullptr)) {
        fmt::print(stderr, "frugal launch: --env '{}': expected NAME=VALUE, or the NAME of a variable set here\n", item);
        std::exit(2);
      }
      spec->env[name] = eq == std::string::npos ? std::string(value) : item.substr(eq + 1);
    }
    // A local rank's program must exist here: otherwise every rank fails to start (exit 127) and the
    // launch ends with their status instead of saying why.
    if (spec->hostfile.empty() && spec->transport == comm::Transport::zmq) {
      if (const std::string missing = missing_program(spec->command.front()); !missing.empty()) {
        fmt::print(stderr, "frugal launch: {}\n", missing);
        std::exit(2);
      }
    }
    // A path that means the same file from any working directory: ranks over ssh may start elsewhere.
    if (!key->empty()) spec->env[std::string(comm::env::kClusterKey)] = std::filesystem::absolute(*key).string();
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
