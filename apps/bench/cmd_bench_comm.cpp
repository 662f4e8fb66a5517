// `frugal bench comm [--tune]`: under mpirun, each kind of collective timed over Open MPI and over
// frugal's ZeroMQ mesh (opened beside MPI, as --transport-map does) at several message sizes; with
// --tune the timings are saved as the table `--transport-map auto` routes by (comm/transport_table.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "comm/routed_communicator.h"
#include "comm/transport_table.h"
#include "core/check.h"
#include "core/staged_file.h"

namespace frugal::cli {
namespace {

constexpr uint64_t kMaxBytes = uint64_t{1} << 30;  // 1 GiB messages
constexpr int kMaxIterations = 100000;
constexpr size_t kMaxSizes = 64;
constexpr double kMaxBytesPerKind = double(uint64_t{1} << 40);  // 1 TiB per kind and transport

struct BenchCommArgs {
  bool tune = false;
  std::string out;
  std::vector<uint64_t> sizes{4 << 10, 64 << 10, 1 << 20, 16 << 20};
  int iterations = 10;
};

// Seconds per call of `kind` with a `bytes`-byte buffer over `c`, the slowest rank's (after two
// untimed calls).
double time_kind(comm::Communicator& c, comm::OpRoute kind, uint64_t bytes, int iterations) {
  const size_t floats = std::max<size_t>(bytes / sizeof(float), static_cast<size_t>(c.size()));
  const size_t part = floats / static_cast<size_t>(c.size());
  std::vector<float> buffer(part * static_cast<size_t>(c.size()), 1.0f), mine(part, 1.0f);
  const auto call = [&] {
    switch (kind) {
      case comm::OpRoute::all_reduce: c.all_reduce(buffer).wait(); break;
      case comm::OpRoute::all_gather: c.all_gather(std::span<const float>(mine), buffer).wait(); break;
      case comm::OpRoute::reduce_scatter: c.reduce_scatter(std::span<const float>(buffer), mine).wait(); break;
      default: c.broadcast(buffer, 0).wait(); break;
    }
  };
  call();
  call();
  c.barrier().wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) call();
  std::vector<float> seconds{static_cast<float>(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations)};
  c.all_reduce(seconds, comm::ReduceOp::max).wait();
  return seconds[0];
}

void run_bench_comm(const BenchCommArgs& a) {
  // Each kind and transport moves --iterations x the sizes' sum: bounded before any rank starts.
  FRUGAL_CHECK(a.sizes.size() <= kMaxSizes,
               fmt::format("--sizes: {} sizes; give at most {}", a.sizes.size(), kMaxSizes));
  double bytes = 0;
  for (const uint64_t size : a.sizes) bytes += static_cast<double>(size);
  FRUGAL_CHECK(static_cast<double>(a.iterations) * bytes <= kMaxBytesPerKind,
               fmt::format("--iterations {} of --sizes summing to {} bytes move {:.0f} GiB per kind of collective and "
                           "transport, more than the {:.0f} GiB a benchmark should: fewer iterations or smaller sizes",
                           a.iterations, bytes, static_cast<double>(a.iterations) * bytes / 1073741824.0,
                           kMaxBytesPerKind / 1073741824.0));
  // Both transports: every kind named over zmq opens the mesh beside MPI (the flag's and the
  // variable's map give way: this command times each transport itself).
  comm::InitOptions options;
  options.settings[std::string(comm::env::kTransportMap)] = {"all_reduce=zmq", "frugal bench comm"};
  auto world = comm::init(options);
  auto* routed = dynamic_cast<comm::RoutedCommunicator*>(world.get());
  FRUGAL_CHECK(routed != nullptr && world->size() > 1,
               "frugal bench comm times Open MPI against ZeroMQ between the ranks of an mpirun job: run it as "
               "`mpirun -np N frugal bench comm` with N >= 2 (the ranks the jobs it tunes for will use)");
  comm::TransportTable table;
  table.ranks = world->size();
  const bool say = world->rank() == 0;
  if (say) fmt::print("{} ranks; seconds per call, the slowest rank's, {} calls each\n", world->size(), a.iterations);
  for (const comm::OpRoute kind : {comm::OpRoute::all_reduce, comm::OpRoute::all_gather, comm::OpRoute::reduce_scatter,
                                   comm::OpRoute::broadcast}) {
    for (const uint64_t bytes : a.sizes) {
      comm::TransportTiming t{.bytes = bytes};
      // In turn, so that a drift in the machine's speed touches both alike.
      t.mpi_seconds = time_kind(routed->transport(comm::Transport::mpi), kind, bytes, a.iterations);
      t.zmq_seconds = time_kind(routed->transport(comm::Transport::zmq), kind, bytes, a.iterations);
      table.by_kind[static_cast<size_t>(kind)].push_back(t);
      if (say)
        fmt::print("  {:15} {:>10} bytes: mpi {:.6f} s, zmq {:.6f} s -> {}\n", comm::to_string(kind), bytes,
                   t.mpi_seconds, t.zmq_seconds, t.zmq_seconds < t.mpi_seconds ? "zmq" : "mpi");
    }
  }
  if (!say) return;
  fmt::print("per kind (calls whose size not every rank knows): {}\n", table.per_kind().to_string());
  if (!a.tune) return;
  const std::string out = a.out.empty() ? comm::default_transport_table_path() : a.out;
  const auto parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  StagedFile file(out);
  file.write(table.to_json());
  file.write("\n");
  file.commit();
  fmt::print("saved {}: `--transport-map auto` routes by it (on every rank: give them the same file)\n", out);
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto a = std::make_shared<BenchCommArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "comm", "under mpirun: each kind of collective timed over Open MPI and over ZeroMQ at several sizes; --tune "
              "saves the table --transport-map auto routes by");
  cmd->add_flag("--tune", a->tune, "save the timings as the table of --transport-map auto (--out)");
  cmd->add_option("--out", a->out, "the table's file (default $HOME/.frugal/transport-table.json)");
  // Bounded: every rank holds a buffer of each size, and each kind, size and transport is called
  // --iterations times over the network.
  cmd->add_option("--sizes", a->sizes, "message sizes in bytes, e.g. 4096,65536,1048576")
      ->delimiter(',')->capture_default_str()->check(cli::in_range(uint64_t{1}, kMaxBytes));
  cmd->add_option("--iterations", a->iterations, "timed calls per kind, size and transport")
      ->capture_default_str()->check(cli::in_range(1, kMaxIterations));
  cmd->callback([a] { run_bench_comm(*a); });
}

}  // namespace frugal::cli
