#include "comm/init.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "comm/environment.h"
#include "comm/local_communicator.h"
#include "comm/local_port.h"
#include "comm/mpi_communicator.h"
#include "comm/routed_communicator.h"
#include "comm/transport_table.h"
#include "comm/run_token.h"
#include "comm/slurm.h"
#include "comm/zmq_communicator.h"
#include "core/parse.h"

namespace frugal::comm {
namespace {

// A setting as init read it: its text and where it came from (the flag or the variable), which is
// what an error about it names.
struct Setting {
  std::string text, source;
};

// The flags init(argc, argv) takes out of argv; each stands for a variable (comm/environment.h).
constexpr std::string_view kCoordinatorFlag = "--coordinator", kClusterKeyFlag = "--cluster-key",
                           kTimeoutFlag = "--comm-timeout", kRankFlag = "--rank", kSizeFlag = "--size";

struct Flags {
  bool parsed = false;  // init(argc, argv): the flags below were looked for
  std::optional<std::string> coordinator, cluster_key, timeout, rank, size;
};

// Takes our flags out of argv ("--name value" or "--name=value").
Flags extract_flags(int& argc, char** argv) {
  Flags f;
  f.parsed = true;
  const std::pair<std::string_view, std::optional<std::string>*> known[] = {
      {kCoordinatorFlag, &f.coordinator}, {kClusterKeyFlag, &f.cluster_key},
      {kTimeoutFlag, &f.timeout},         {kRankFlag, &f.rank},
      {kSizeFlag, &f.size}};
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    bool taken = false;
    const std::string_view arg = argv[i];
    for (const auto& [name, slot] : known) {
      if (arg == name) {
        FRUGAL_CHECK(i + 1 < argc, fmt::format("{} needs a value", name));
        *slot = argv[++i];
        taken = true;
      } else if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=') {
        *slot = std::string(arg.substr(name.size() + 1));
        taken = true;
      }
      if (taken) break;
    }
    if (std::strcmp(argv[i], "--") == 0) {  // the program's own arguments follow: keep them all
      for (; i < argc; ++i) argv[out++] = argv[i];
      break;
    }
    if (!taken) argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  return f;
}

// The flag's value when init took one from argv, else the program's (InitOptions::settings), else
// the variable's (unset or empty: none).
std::optional<Setting> setting(const std::optional<std::string>& flag, std::string_view flag_name,
                               std::string_view variable, const InitOptions& options) {
  if (flag) return Setting{*flag, std::string(flag_name)};
  if (const auto it = options.settings.find(variable); it != options.settings.end())
    return Setting{it->second.value, it->second.source};
  const char* v = std::getenv(std::string(variable).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return Setting{v, std::string(variable)};
}

// How to set something that is missing: the variable, or either when init reads flags too.
std::string how_to_set(const Flags& f, std::string_view variable, std::string_view flag) {
  return f.parsed ? fmt::format("{} or {}", variable, flag) : std::string(variable);
}

int parse_int(const Setting& s) { return parse_number<int>(s.source, s.text, "an integer"); }

std::chrono::milliseconds parse_seconds(const Setting& s) {
  const double v = parse_number<double>(s.source, s.text, "a positive number of seconds",
                                        [](double x) { return x > 0 && x < 1e9; });
  return std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
}

// The peer timeout: init's flag, the program's setting, InitOptions::comm_timeout_seconds, the variable.
std::optional<Setting> timeout_setting(const Flags& f, const InitOptions& options) {
  auto timeout = setting(f.timeout, kTimeoutFlag, env::kCommTimeout, options);
  if (!f.timeout && !options.settings.count(env::kCommTimeout) && options.comm_timeout_seconds)
    timeout = Setting{fmt::format("{}", *options.comm_timeout_seconds), "InitOptions::comm_timeout_seconds"};
  return timeout;
}

std::optional<Transport> forced_transport(const InitOptions& options) {
  const auto s = setting(std::nullopt, "", env::kTransport, options);
  if (!s) return std::nullopt;
  for (const Transport t : {Transport::zmq, Transport::mpi, Transport::local})
    if (s->text == to_string(t)) return t;
  throw_bad_value(s->source, s->text, "zmq, mpi or local");
}

// A ZeroMQ rank allocates and frees large buffers at a high rate: the collectives' 1 MB segments
// and ZeroMQ's buffer for every frame received. glibc's defaults give such chunks back to the kernel
// (munmap, and heap trimming past twice the adaptive mmap threshold) and fault them in again, zeroed,
// for the next frame: at 2 ranks on loopback a 4 MB all-reduce took 15 ms instead of 3.5 (bench/REPORT.md,
// "Large buffers kept"). So chunks up to 32 MB come from the heap and up to 128 MB of free heap is
// kept for reuse, unless the user tuned malloc (GLIBC_TUNABLES or MALLOC_*_ variables).
void keep_large_buffers() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr)
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

// The ZeroMQ communicator's errors name its options (ZmqOptions::cluster_key); this process set
// them from the variables or flags, so those are what its errors name instead.
std::unique_ptr<Communicator> join_zmq(const ZmqOptions& o, const Flags& f) {
  keep_large_buffers();
  try {
    return make_zmq_communicator(o);
  } catch (const CommError& e) {
    std::string what = e.what();
    const std::pair<std::string_view, std::string> fields[] = {
        {"ZmqOptions::cluster_key", how_to_set(f, env::kClusterKey, fmt::format("{} FILE", kClusterKeyFlag))},
        {"ZmqOptions::run_token", std::string(env::kRunToken)}};
    bool named = false;
    for (const auto& [field, source] : fields) {
      for (size_t at = what.find(field); at != std::string::npos; at = what.find(field, at + source.size())) {
        what.replace(at, field.size(), source);
        named = true;
      }
    }
    if (!named) throw;
    throw CommError(what);
  }
}

void apply_zmq_settings(ZmqOptions& o, const Flags& f, const InitOptions& options);
std::unique_ptr<Communicator> mpi_and_zmq(const Flags& f, const InitOptions& options, const Setting& map_setting);

std::unique_ptr<Communicator> init_from(const Flags& f, const InitOptions& options) {
  const std::optional<Transport> transport = forced_transport(options);
  const auto size = setting(f.size, kSizeFlag, env::kSize, options);
  if (transport == Transport::mpi || (!transport && started_by_mpirun())) {
    if (const auto map = setting(std::nullopt, "", env::kTransportMap, options)) return mpi_and_zmq(f, options, *map);
    return make_mpi_communicator(options.run_config);
  }
  const auto rank = setting(f.rank, kRankFlag, env::kRank, options);
  // A task of `srun`: Slurm's variables place it, unless ours (or their flags) do.
  std::optional<slurm::Placement> slurm_task;
  if (!size && !rank) slurm_task = slurm::from_environment();
  // One Slurm task (an sbatch script runs as task 0 of 1) is one rank, without a coordinator.
  const bool several_slurm_tasks = slurm_task && slurm_task->size > 1;
  if (transport == Transport::local || (!transport && !size && !several_slurm_tasks))
    return std::move(make_local_communicators(1)[0]);
  ZmqOptions o;
  o.size = size ? parse_int(*size) : slurm_task ? slurm_task->size : 1;
  FRUGAL_CHECK(rank || slurm_task || o.size == 1,
               fmt::format("a ZeroMQ run needs the rank: {}", how_to_set(f, env::kRank, kRankFlag)));
  if (rank) o.rank = parse_int(*rank);
  if (slurm_task) o.rank = slurm_task->rank;
  auto coordinator = setting(f.coordinator, kCoordinatorFlag, env::kCoordinator, options);
  if (!coordinator && slurm_task && !slurm_task->first_host.empty()) {
    // Rank 0 runs on the step's first node (Slurm gives task 0 to it).
    const auto port = setting(std::nullopt, "", env::kCoordinatorPort, options);
    const int number = port ? parse_number<int>(port->source, port->text, "a TCP port, 1 to 65535",
                                                [](int p) { return p >= 1 && p <= 65535; })
                            : slurm::kDefaultCoordinatorPort;
    coordinator = Setting{fmt::format("{}:{}", slurm_task->first_host, number),
                          fmt::format("the first host of {}", slurm_task->first_host_source)};
  }
  FRUGAL_CHECK(coordinator || o.size == 1,
               fmt::format("a ZeroMQ run needs the coordinator: {}{}",
                           how_to_set(f, env::kCoordinator, fmt::format("{} host:port", kCoordinatorFlag)),
                           slurm_task ? fmt::format(" (a Slurm task takes it from {} or {}, which are unset)",
                                                    env::kSlurmStepNodeList, env::kSlurmJobNodeList)
                                      : ""));
  if (coordinator) o.coordinator = coordinator->text;
  apply_zmq_settings(o, f, options);
  return join_zmq(o, f);
}

// The ZeroMQ settings every rank takes from its flags, the program or the variables alike: the
// cluster key or run token, the timeouts, the bind host, the message limits, the run config.
void apply_zmq_settings(ZmqOptions& o, const Flags& f, const InitOptions& options) {
  auto key = setting(f.cluster_key, kClusterKeyFlag, env::kClusterKey, options);
  if (!f.cluster_key && !options.settings.count(env::kClusterKey) && options.cluster_key)
    key = Setting{*options.cluster_key, "InitOptions::cluster_key"};
  if (key) o.cluster_key = load_cluster_key(key->text);
  if (const auto token = setting(std::nullopt, "", env::kRunToken, options)) {
    FRUGAL_CHECK(token->text.size() <= 255,
                 fmt::format("{}: a run token of {} bytes; at most 255 fit ZeroMQ's PLAIN mechanism", token->source,
                             token->text.size()));
    o.run_token = token->text;
  }
  if (const auto timeout = timeout_setting(f, options)) o.timeout = parse_seconds(*timeout);
  if (const auto t = setting(std::nullopt, "", env::kRendezvousTimeout, options)) o.rendezvous_timeout = parse_seconds(*t);
  if (const auto h = setting(std::nullopt, "", env::kBindHost, options)) o.bind_host = h->text;
  if (const auto m = setting(std::nullopt, "", env::kMaxMessageBytes, options))
    o.max_message_bytes = parse_number<int64_t>(m->source, m->text, "a number of bytes, at least 1024",
                                                [](int64_t x) { return x >= 1024; });
  if (const auto q = setting(std::nullopt, "", env::kMaxQueuedBytes, options))
    o.max_queued_bytes = parse_number<int64_t>(q->source, q->text, "a number of bytes, at least 1024",
                                               [](int64_t x) { return x >= 1024; });
  o.run_config = options.run_config;
}

// An mpirun job with --transport-map: the MPI world, and beside it the ZeroMQ mesh of the same ranks
// (rank r over MPI is rank r over ZeroMQ). Rank 0 chooses the coordinator address (--coordinator
// when given, else a free port on 127.0.0.1 when every rank runs on its host) and, without a cluster
// key or FRUGAL_RUN_TOKEN, a run token, and sends both to the others over MPI.
std::unique_ptr<Communicator> mpi_and_zmq(const Flags& f, const InitOptions& options, const Setting& map_setting) {
  // auto: the table `frugal bench comm --tune` measured on this cluster.
  std::optional<TransportTable> table;
  if (map_setting.text == "auto") {
    const auto path = setting(std::nullopt, "", env::kTransportTable, options);
    table = load_transport_table(path ? path->text : default_transport_table_path());
  }
  const TransportMap map = table ? table->per_kind() : parse_transport_map(map_setting.text, map_setting.source);
  InitOptions with_map = options;
  // Every rank must route each kind alike: the map (or the table's digest) is part of what ranks
  // compare at start.
  with_map.run_config["transport_map"] = table ? fmt::format("auto:{:08x}", table->digest()) : map.to_string();
  auto mpi = make_mpi_communicator(with_map.run_config);
  if (!table && !map.uses(Transport::zmq)) return mpi;  // everything over MPI: no mesh to open
  ZmqOptions o;
  o.size = mpi->size();
  o.rank = mpi->rank();
  apply_zmq_settings(o, f, with_map);
  const auto coordinator = setting(f.coordinator, kCoordinatorFlag, env::kCoordinator, options);
  // Where every rank runs: the loopback serves as the coordinator's address only on one host.
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const std::string host(name);
  std::vector<std::vector<std::byte>> hosts;
  mpi->all_gather_bytes(std::as_bytes(std::span(host.data(), host.size())), hosts).wait();
  bool one_host = true;
  for (const auto& h : hosts) one_host = one_host && std::string(reinterpret_cast<const char*>(h.data()), h.size()) == host;
  FRUGAL_CHECK(coordinator || one_host,
               fmt::format("{} {}: the ranks run on several hosts, so rank 0's ZeroMQ address must be given: {}",
                           map_setting.source, map_setting.text,
                           how_to_set(f, env::kCoordinator, fmt::format("{} host:port", kCoordinatorFlag))));
  // Rank 0's choices, sent over MPI: "coordinator\ntoken".
  std::vector<std::byte> message;
  if (o.rank == 0) {
    const std::string address = coordinator ? coordinator->text : fmt::format("127.0.0.1:{}", free_local_port());
    const std::string token = o.cluster_key || !o.run_token.empty() ? o.run_token : new_run_token();
    const std::string text = address + "\n" + token;
    const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
    message.assign(bytes.begin(), bytes.end());
  }
  mpi->broadcast_bytes(message, 0).wait();
  const std::string text(reinterpret_cast<const char*>(message.data()), message.size());
  o.coordinator = text.substr(0, text.find('\n'));
  if (!o.cluster_key) o.run_token = text.substr(text.find('\n') + 1);
  auto zmq = join_zmq(o, f);
  if (table) return std::make_unique<RoutedCommunicator>(*table, std::move(mpi), std::move(zmq));
  return std::make_unique<RoutedCommunicator>(map, std::move(mpi), std::move(zmq));
}

}  // namespace

std::unique_ptr<Communicator> init(int& argc, char** argv, const InitOptions& options) {
  return init_from(extract_flags(argc, argv), options);
}

std::unique_ptr<Communicator> init(const InitOptions& options) { return init_from({}, options); }

double comm_timeout_seconds(const InitOptions& options) {
  const auto timeout = timeout_setting({}, options);
  return timeout ? static_cast<double>(parse_seconds(*timeout).count()) / 1000.0 : env::kDefaultCommTimeoutSeconds;
}

}  // namespace frugal::comm
