#include "apps/launch/launcher.h"

#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "apps/launch/hostfile.h"
#include "apps/launch/netns_cluster.h"
#include "apps/launch/restart_policy.h"
#include "comm/environment.h"
#include "comm/local_port.h"
#include "comm/run_token.h"
#include "comm/slurm.h"
#include "core/check.h"

namespace frugal::cli {
namespace {

extern "C" char** environ;

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// One output stream of one child, cut into lines.
struct Stream {
  int fd;
  FILE* out;
  int label;  // rank, or -1: lines carry Open MPI's "[job,rank]<stdout>:" tag instead
  std::string partial;
};

void emit(const Stream& s, const std::string& line) {
  if (s.label >= 0) {
    fmt::print(s.out, "[{}] {}\n", s.label, line);
  } else if (line.size() > 1 && line[0] == '[') {
    // "[1,3]<stdout>:text" -> "[3] text"
    const auto comma = line.find(','), close = line.find(']'), colon = line.find(">:");
    if (comma != std::string::npos && close != std::string::npos && colon != std::string::npos &&
        comma < close && close < colon) {
      fmt::print(s.out, "[{}] {}\n", line.substr(comma + 1, close - comma - 1), line.substr(colon + 2));
    } else {
      fmt::print(s.out, "{}\n", line);
    }
  } else {
    fmt::print(s.out, "{}\n", line);
  }
  std::fflush(s.out);
}

bool pump(Stream& s) {  // false at end of stream
  char buf[65536];
  const ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    if (!s.partial.empty()) emit(s, s.partial);
    s.partial.clear();
    ::close(s.fd);
    return false;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    emit(s, s.partial.substr(start, nl - start));
    start = nl + 1;
  }
  s.partial.erase(0, start);
  return true;
}

struct Child {
  pid_t pid = -1;
  int rank;
  bool running = true;
  // A rank on another host: the write end of its ssh client's stdin, held open while the rank should
  // run; closing it stops the rank (apps/launch/hostfile.h). -1 for a local rank.
  int stdin_fd = -1;
};

// netns_fd >= 0: the child enters that network namespace before exec. stdin_pipe: the child's
// stdin is a pipe whose write end the returned Child holds.
Child spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int rank, std::vector<Stream>& streams, int netns_fd = -1, bool stdin_pipe = false) {
  int out[2], err[2], in[2] = {-1, -1};
  FRUGAL_CHECK(::pipe(out) == 0 && ::pipe(err) == 0, "frugal launch: pipe failed");
  // Close-on-exec: a later child must not hold this rank's pipe open, or closing it would not stop
  // the rank.
  FRUGAL_CHECK(!stdin_pipe || ::pipe2(in, O_CLOEXEC) == 0,
               fmt::format("frugal launch: pipe failed: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  FRUGAL_CHECK(pid >= 0, fmt::format("frugal launch: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, so stopping it reaches its children too
    if (netns_fd >= 0) {
      if (::setns(netns_fd, CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "frugal launch: rank %d cannot enter its network namespace: %s\n", rank,
                     std::strerror(errno));
        ::_exit(127);
      }
      // A launcher killed with SIGKILL cannot stop its ranks; without this they would keep the
      // namespaces alive, cut off from one another, until --cleanup-stale.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(128 + SIGTERM);
    }
    if (stdin_pipe) ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    ::close(err[0]);
    ::close(err[1]);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "frugal launch: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  if (stdin_pipe) ::close(in[0]);
  const int label = rank;
  streams.push_back({out[0], stdout, label, {}});
  streams.push_back({err[0], stderr, label, {}});
  return {pid, rank, true, in[1]};
}


// Signals the process group of a child this launcher started and has not reaped (spawn() made it the
// leader of a group of its own, so its pid is the group's id), and nothing else: never group 0 or 1
// (kill(0) or kill(-1) would reach the launcher's own group, or every process), never the launcher's
// own group, which it shares with whoever started it (a shell, meson test).
void signal_child_group(const Child& c, int sig) {
  if (!c.running || c.pid <= 1 || c.pid == ::getpid() || c.pid == ::getpgrp()) return;
  ::kill(-c.pid, sig);
}

// The variables that place one rank of a ZeroMQ run (comm::init reads them).
std::map<std::string, std::string> rank_environment(const LaunchSpec& spec, int rank, const std::string& coordinator) {
  auto env = spec.env;
  env[std::string(comm::env::kRank)] = std::to_string(rank);
  env[std::string(comm::env::kSize)] = std::to_string(spec.ranks);
  env[std::string(comm::env::kLocalSize)] = std::to_string(spec.ranks);  // one host: they share its cores
  env[std::string(comm::env::kCoordinator)] = coordinator;
  env[std::string(comm::env::kTransport)] = comm::to_string(comm::Transport::zmq);
  return env;
}

// Variables a rank started over ssh does not inherit from the launcher as a local one does: every
// FRUGAL_* of the launcher's environment except those that place one rank (set per rank).
std::map<std::string, std::string> forwarded_environment() {
  const std::string_view per_rank[] = {comm::env::kRank,      comm::env::kSize,     comm::env::kCoordinator,
                                       comm::env::kLocalSize, comm::env::kBindHost, comm::env::kTransport,
                                       comm::env::kRestartCount};
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const size_t eq = entry.find('=');
    if (!entry.starts_with("FRUGAL_") || eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    if (std::find(std::begin(per_rank), std::end(per_rank), name) != std::end(per_rank)) continue;
    env.emplace(name, entry.substr(eq + 1));
  }
  return env;
}

// The ranks of `spec` on the hosts of its hostfile, each started by its --ssh command.
void spawn_remote(const LaunchSpec& spec, std::vector<Stream>& streams, std::vector<Child>& children) {
  const std::vector<std::string> placed = place_ranks(read_hostfile(spec.hostfile), spec.ranks, spec.hostfile);
  const std::string coordinator =
      spec.coordinator.empty() ? fmt::format("{}:{}", host_address(placed[0]), comm::slurm::kDefaultCoordinatorPort)
                               : spec.coordinator;
  std::map<std::string, int> on_host;
  for (const auto& h : placed) ++on_host[h];
  std::vector<std::string> ssh = split_words(spec.ssh, "--ssh");
  if (std::filesystem::path(ssh[0]).filename() == "ssh") ssh.insert(ssh.begin() + 1, {"-o", "BatchMode=yes"});
  LaunchSpec with_env = spec;
  for (auto& [name, value] : forwarded_environment()) with_env.env.emplace(name, value);  // spec.env wins
  std::error_code ec;
  const std::string directory = std::filesystem::current_path(ec).string();
  fmt::print(stderr, "frugal launch: {} ranks on {} host(s) of {}, coordinator {}\n", spec.ranks, on_host.size(),
             spec.hostfile, coordinator);
  for (int r = 0; r < spec.ranks; ++r) {
    auto env = rank_environment(with_env, r, coordinator);
    env[std::string(comm::env::kLocalSize)] = std::to_string(on_host[placed[static_cast<size_t>(r)]]);
    std::vector<std::string> argv = ssh;
    argv.push_back(placed[static_cast<size_t>(r)]);
    argv.push_back(remote_command(directory, env, spec.command, spec.grace_seconds));
    children.push_back(spawn(argv, {}, r, streams, -1, /*stdin_pipe=*/true));
  }
}

// One start of the job: the ranks of `spec` (its command and environment), supervised until every
// one has exited. When one fails the others are stopped; `interrupted`: the launcher itself was
// signalled (no restart then).
struct Attempt {
  int status = 0;
  bool interrupted = false;
};

Attempt run_attempt(const LaunchSpec& spec, NetnsCluster* net) {
  bool interrupted = false;
  std::vector<Stream> streams;
  std::vector<Child> children;
  if (spec.transport == comm::Transport::zmq && !spec.hostfile.empty()) {
    spawn_remote(spec, streams, children);
  } else if (spec.transport == comm::Transport::zmq && net != nullptr) {
    // Fresh namespaces: nothing else listens there, so a fixed port cannot collide.
    const int port = 29500;
    fmt::print(stderr, "{}", net->describe(port));
    const std::string coordinator = fmt::format("{}:{}", net->address(0), port);
    for (int r = 0; r < spec.ranks; ++r) {
      auto env = rank_environment(spec, r, coordinator);
      env[std::string(comm::env::kBindHost)] = net->address(r);
      // What --cleanup-stale recognizes this launcher's ranks by, should it be SIGKILLed.
      env[NetnsCluster::kOwnerVariable] = net->owner();
      const std::string path = net->namespace_path(r);
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      FRUGAL_CHECK(fd >= 0, fmt::format("frugal launch: cannot open {}: {}", path, std::strerror(errno)));
      try {
        children.push_back(spawn(spec.command, env, r, streams, fd));
      } catch (...) {
        ::close(fd);
        throw;
      }
      ::close(fd);
    }
  } else if (spec.transport == comm::Transport::zmq) {
    const std::string coordinator =
        spec.coordinator.empty() ? fmt::format("127.0.0.1:{}", comm::free_local_port()) : spec.coordinator;
    for (int r = 0; r < spec.ranks; ++r) {
      children.push_back(spawn(spec.command, rank_environment(spec, r, coordinator), r, streams));
    }
  } else if (spec.transport == comm::Transport::mpi) {
    std::vector<std::string> argv = {"mpirun", "--oversubscribe", "--tag-output", "-n",
                                     std::to_string(spec.ranks)};
    if (::geteuid() == 0) argv.insert(argv.begin() + 1, "--allow-run-as-root");
    for (const auto& [k, v] : spec.env) {
      argv.push_back("-x");
      argv.push_back(k + "=" + v);
    }
    argv.insert(argv.end(), spec.command.begin(), spec.command.end());
    children.push_back(spawn(argv, spec.env, -1, streams));
  } else {
    throw Error(fmt::format("frugal launch: --transport {}: expected zmq or mpi", comm::to_string(spec.transport)));
  }

  std::optional<int> status;  // first failure
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  auto stop_others = [&](const char* why) {
    if (kill_at) return;
    fmt::print(stderr, "frugal launch: {}; stopping the other ranks\n", why);
    bool remote = false;
    for (Child& c : children) {
      if (c.stdin_fd >= 0) {
        // The remote wrapper stops the rank (SIGTERM, SIGKILL after the grace) and exits, and ssh
        // with it; the local ssh client is killed only if that has not happened in time.
        ::close(c.stdin_fd);
        c.stdin_fd = -1;
        remote = true;
      } else {
        signal_child_group(c, SIGTERM);
      }
    }
    kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(spec.grace_seconds + (remote ? 5 : 0));
  };
  size_t open_streams = streams.size();
  std::vector<bool> open(streams.size(), true);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (open[i]) {
        fds.push_back({streams[i].fd, POLLIN, 0});
        which.push_back(i);
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents && !pump(streams[which[k]])) {
        open[which[k]] = false;
        --open_streams;
      }
    }
    int wstatus;
    pid_t pid;
    while ((pid = ::waitpid(-1, &wstatus, WNOHANG)) > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        if (c.stdin_fd >= 0) ::close(c.stdin_fd);
        c.stdin_fd = -1;
        const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
        if (code != 0 && !status) {
          status = code;
          const std::string who = c.rank >= 0 ? fmt::format("rank {}", c.rank) : "mpirun";
          stop_others(WIFEXITED(wstatus)
                          ? fmt::format("{} exited with status {}", who, code).c_str()
                          : fmt::format("{} was killed by signal {}", who, WTERMSIG(wstatus)).c_str());
        }
      }
    }
    if (g_signal && !status) {
      status = 128 + g_signal;
      interrupted = true;
      stop_others(fmt::format("received signal {}", static_cast<int>(g_signal)).c_str());
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      for (const Child& c : children) signal_child_group(c, SIGKILL);
    }
    const bool any_running =
        std::any_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
    if (!any_running && open_streams == 0) break;
    if (!any_running && kill_at) {
      // Grandchildren may keep a pipe open; do not wait for them beyond the grace period.
      if (std::chrono::steady_clock::now() >= *kill_at) break;
    }
  }
  for (Child& c : children) {
    if (c.stdin_fd >= 0) ::close(c.stdin_fd);
  }
  return {status.value_or(0), interrupted};
}


// Whether `name` is set, to something, for the ranks: in `env` or the launcher's own environment.
bool set_for_ranks(const LaunchSpec& spec, std::string_view name) {
  const std::string key(name);
  if (const auto it = spec.env.find(key); it != spec.env.end()) return !it->second.empty();
  const char* v = std::getenv(key.c_str());
  return v != nullptr && *v != '\0';
}

}  // namespace

int launch(const LaunchSpec& spec_given) {
  LaunchSpec spec = spec_given;
  if (spec.transport == comm::Transport::zmq && spec.run_token && !set_for_ranks(spec, comm::env::kClusterKey) &&
      !set_for_ranks(spec, comm::env::kRunToken))
    spec.env[std::string(comm::env::kRunToken)] = comm::new_run_token();
  FRUGAL_CHECK(spec.ranks >= 1, fmt::format("frugal launch: -n {} is not a rank count", spec.ranks));
  FRUGAL_CHECK(!spec.command.empty(), "frugal launch: no command given (frugal launch -n N -- CMD ...)");
  FRUGAL_CHECK(spec.min_ranks == 0 || spec.max_restarts > 0,
               fmt::format("frugal launch: --min-ranks {} needs --max-restarts N (it shrinks restarts)", spec.min_ranks));
  FRUGAL_CHECK(spec.min_ranks >= 0 && spec.min_ranks <= spec.ranks,
               fmt::format("frugal launch: --min-ranks {} must be between 0 (off) and -n {}", spec.min_ranks,
                           spec.ranks));
  if (!spec.hostfile.empty()) {
    FRUGAL_CHECK(spec.transport == comm::Transport::zmq,
                 "--hostfile starts ZeroMQ ranks over ssh; for --transport mpi give mpirun its own --hostfile");
    FRUGAL_CHECK(spec.bandwidth.empty(), "--bandwidth emulates hosts on this machine: drop it or --hostfile");
    FRUGAL_CHECK(spec.max_restarts == 0,
                 "--max-restarts does not work with --hostfile: a restart resumes from the command's --checkpoint "
                 "DIR as this machine sees it, which need not be what the hosts see");
    place_ranks(read_hostfile(spec.hostfile), spec.ranks, spec.hostfile);  // errors before anything starts
    split_words(spec.ssh, "--ssh");
  }
  std::optional<LinkRate> rate;
  if (!spec.bandwidth.empty()) {
    rate = parse_link_rate(spec.bandwidth);  // a typo is reported before anything needs root
    if (spec.transport != comm::Transport::zmq) {
      throw Error("--bandwidth works with --transport zmq only (mpirun starts every rank itself, "
                  "outside the namespaces)");
    }
    if (!spec.coordinator.empty()) {
      throw Error("--bandwidth chooses the coordinator address inside the emulated network: drop "
                  "--coordinator");
    }
  }
  // Before the network is built: a Ctrl-C or SIGTERM from here on still removes what was made.
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);

  // Destroyed on every way out of this function, after the ranks have been reaped.
  std::optional<NetnsCluster> net;
  if (rate) {
    try {
      net.emplace(spec.ranks, *rate, &g_signal);
    } catch (const Error& e) {
      if (!g_signal) throw;
      fmt::print(stderr, "frugal launch: {}; removed what was built\n", e.what());
      return 128 + g_signal;
    }
  }
  const RestartPolicy policy(spec.command, spec.max_restarts);
  if (policy.max_restarts() > 0 && policy.checkpoint().empty())
    fmt::print(stderr, "frugal launch: --max-restarts {}: the command has no --checkpoint DIR, so a restart starts "
                       "the run from scratch\n", policy.max_restarts());
  int ranks = spec.ranks;
  for (int restarts = 0;; ++restarts) {
    LaunchSpec attempt = spec;
    attempt.ranks = ranks;
    attempt.command = policy.command_for(restarts);
    // Only under --max-restarts: without it the ranks' environment is what it always was.
    if (policy.max_restarts() > 0) attempt.env[std::string(comm::env::kRestartCount)] = std::to_string(restarts);
    if (restarts > 0)
      fmt::print(stderr, "frugal launch: restart {} of {} (--max-restarts): every rank starts again, {}{}\n", restarts,
                 policy.max_restarts(), policy.describe(restarts),
                 ranks < spec.ranks ? fmt::format(", on {} of the {} ranks (--min-ranks {})", ranks, spec.ranks,
                                                  spec.min_ranks)
                                    : "");
    const Attempt result = run_attempt(attempt, net ? &*net : nullptr);
    if (result.status == 0 || result.interrupted || g_signal) return result.status;
    if (!policy.can_restart(restarts)) {
      if (policy.max_restarts() > 0)
        fmt::print(stderr, "frugal launch: the job failed again and all {} restart(s) of --max-restarts are used; "
                           "giving up with status {}\n", policy.max_restarts(), result.status);
      return result.status;
    }
    if (spec.min_ranks > 0 && ranks > spec.min_ranks) --ranks;  // the failed rank's place is left out
  }
}

}  // namespace frugal::cli
