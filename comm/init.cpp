#include "comm/init.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/zmq_communicator.h"

namespace frugal::comm {
namespace {

struct Flags {
  std::optional<std::string> coordinator, cluster_key, timeout, rank, size;
};

// Takes our flags out of argv ("--name value" or "--name=value").
Flags extract_flags(int& argc, char** argv) {
  Flags f;
  const std::pair<const char*, std::optional<std::string>*> known[] = {
      {"--coordinator", &f.coordinator}, {"--cluster-key", &f.cluster_key},
      {"--comm-timeout", &f.timeout},    {"--rank", &f.rank},
      {"--size", &f.size}};
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    bool taken = false;
    for (const auto& [name, slot] : known) {
      const size_t n = std::strlen(name);
      if (std::strcmp(argv[i], name) == 0) {
        FRUGAL_CHECK(i + 1 < argc, fmt::format("{} needs a value", name));
        *slot = argv[++i];
        taken = true;
      } else if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') {
        *slot = argv[i] + n + 1;
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

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int parse_int(const std::string& s, const char* what) {
  try {
    size_t used = 0;
    const int v = std::stoi(s, &used);
    FRUGAL_CHECK(used == s.size(), "");
    return v;
  } catch (...) {
    throw Error(fmt::format("{}: '{}' is not an integer", what, s));
  }
}

std::chrono::milliseconds parse_seconds(const std::string& s, const char* what) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    FRUGAL_CHECK(used == s.size() && v > 0, "");
    return std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
  } catch (...) {
    throw Error(fmt::format("{}: '{}' is not a positive number of seconds", what, s));
  }
}

std::unique_ptr<Communicator> init_from(const Flags& f, const InitOptions& options) {
  const auto transport = env("FRUGAL_TRANSPORT");
  const auto size = f.size ? f.size : env("FRUGAL_SIZE");
  if (transport == "mpi" || (!transport && started_by_mpirun())) {
    return make_mpi_communicator(options.run_config);
  }
  if (transport == "local" || (!transport && !size)) return std::move(make_local_communicators(1)[0]);
  FRUGAL_CHECK(!transport || transport == "zmq",
               fmt::format("FRUGAL_TRANSPORT='{}': expected zmq, mpi or local", *transport));
  ZmqOptions o;
  o.size = size ? parse_int(*size, "FRUGAL_SIZE / --size") : 1;
  const auto rank = f.rank ? f.rank : env("FRUGAL_RANK");
  FRUGAL_CHECK(rank || o.size == 1, "a ZeroMQ run needs the rank: FRUGAL_RANK or --rank");
  if (rank) o.rank = parse_int(*rank, "FRUGAL_RANK / --rank");
  const auto coordinator = f.coordinator ? f.coordinator : env("FRUGAL_COORDINATOR");
  FRUGAL_CHECK(coordinator || o.size == 1,
               "a ZeroMQ run needs the coordinator: FRUGAL_COORDINATOR or --coordinator host:port");
  if (coordinator) o.coordinator = *coordinator;
  if (const auto key = f.cluster_key ? f.cluster_key : env("FRUGAL_CLUSTER_KEY")) {
    o.cluster_key = load_cluster_key(*key);
  }
  if (const auto t = f.timeout ? f.timeout : env("FRUGAL_COMM_TIMEOUT")) {
    o.timeout = parse_seconds(*t, "FRUGAL_COMM_TIMEOUT / --comm-timeout");
  }
  if (const auto t = env("FRUGAL_RENDEZVOUS_TIMEOUT")) {
    o.rendezvous_timeout = parse_seconds(*t, "FRUGAL_RENDEZVOUS_TIMEOUT");
  }
  if (const auto h = env("FRUGAL_BIND_HOST")) o.bind_host = *h;
  o.run_config = options.run_config;
  return make_zmq_communicator(o);
}

}  // namespace

std::unique_ptr<Communicator> init(int& argc, char** argv, const InitOptions& options) {
  return init_from(extract_flags(argc, argv), options);
}

std::unique_ptr<Communicator> init(const InitOptions& options) { return init_from({}, options); }

}  // namespace frugal::comm
