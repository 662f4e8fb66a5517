#include "apps/launch/netns_cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"
#include "core/parse.h"

namespace frugal::cli {
namespace {

constexpr const char* kNetnsDir = "/run/netns";  // where `ip netns add` puts its names
constexpr int kMaxRanks = 250;                     // one /24, .1 .. .250

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// iproute2 lives in /usr/sbin, which is not on every PATH (sudo, cron, minimal containers).
std::string find_tool(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    for (size_t colon; (colon = p.find(':', start)) != std::string::npos; start = colon + 1) {
      dirs.push_back(p.substr(start, colon - start));
    }
    dirs.push_back(p.substr(start));
  }
  for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.emplace_back(d);
  for (const auto& d : dirs) {
    if (d.empty()) continue;
    const std::string full = d + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

struct ToolResult {
  int status;
  std::string output;  // stdout and stderr together
};

// fork/exec without a shell: the arguments never pass through a command line that could be
// re-split or interpreted.
ToolResult run_tool(const std::string& path, const std::vector<std::string>& argv) {
  int out[2];
  FRUGAL_CHECK(::pipe2(out, O_CLOEXEC) == 0, fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw Error(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    // Own process group: a Ctrl-C at the terminal must not kill the `ip netns del` of the cleanup
    // that this very Ctrl-C started.
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(path.c_str(), args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", path.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(out[1]);
  ToolResult r{0, {}};
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  while (!r.output.empty() && std::isspace(static_cast<unsigned char>(r.output.back()))) r.output.pop_back();
  return r;
}

std::string explain_failure(const std::vector<std::string>& argv, const ToolResult& r) {
  std::string msg = fmt::format("`{}` failed with status {}: {}", join(argv), r.status,
                                r.output.empty() ? "(no output)" : r.output);
  if (r.output.find("Operation not permitted") != std::string::npos ||
      r.output.find("Permission denied") != std::string::npos) {
    msg += " (the kernel refused: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN; a "
           "container must be privileged)";
  } else if (r.output.find("qdisc kind is unknown") != std::string::npos) {
    msg += " (this kernel lacks the tbf qdisc: load sch_tbf)";
  } else if (r.output.find("Unknown device type") != std::string::npos) {
    msg += " (this kernel lacks veth or bridge support)";
  }
  return msg;
}

bool netns_exists(const std::string& name) {
  struct stat st;
  return ::lstat((std::string(kNetnsDir) + "/" + name).c_str(), &st) == 0;
}

bool all_digits(std::string_view d) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A small file of /proc (or the owner record) whole; nullopt when it cannot be read.
std::optional<std::string> read_small(const std::string& path, size_t limit = 1 << 20) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0 || text.size() >= limit) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks since boot): with the pid
// it names one process for good (a recycled pid starts later). Empty when there is no such process.
std::string process_start_time(const std::string& pid) {
  const auto stat = read_small("/proc/" + pid + "/stat");
  if (!stat) return {};
  const size_t close = stat->rfind(')');  // the command name may hold blanks and parentheses
  if (close == std::string::npos) return {};
  std::istringstream fields(stat->substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return field;
  }
  return {};
}

std::string link_target(const std::string& path) {
  char buf[256];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string new_token() {
  uint32_t value = 0;
  try {
    std::random_device device;
    value = device();
  } catch (const std::exception&) {
  }
  // Mixed with the clock as well: a random_device that repeats itself must not repeat names.
  value ^= static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count() * 2654435761u);
  return fmt::format("{:08x}", value);
}

// The owner record of a launcher (NetnsCluster::kOwnerDir).
struct OwnerRecord {
  std::string pid, start, pidns, token;
};

std::string owner_path(const std::string& owner) { return std::string(NetnsCluster::kOwnerDir) + "/" + owner; }

// Only root's: a record another user could write must not name what root's clean-up stops.
std::optional<OwnerRecord> read_owner_record(const std::string& owner) {
  struct stat st;
  const std::string path = owner_path(owner);
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
    return std::nullopt;
  const auto text = read_small(path, 4096);
  if (!text) return std::nullopt;
  OwnerRecord r;
  std::istringstream lines(*text);
  std::string key, value;
  while (lines >> key >> value) {
    if (key == "pid") r.pid = value;
    else if (key == "start") r.start = value;
    else if (key == "pidns") r.pidns = value;
    else if (key == "token") r.token = value;
  }
  if (!all_digits(r.pid) || !all_digits(r.start) || r.pidns.empty() || r.token.empty()) return std::nullopt;
  return r;
}

void write_owner_record(const std::string& owner, const std::string& token) {
  const std::string dir = NetnsCluster::kOwnerDir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(fmt::format("--bandwidth: cannot make {}: {}", dir, std::strerror(errno)));
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
    throw Error(fmt::format("--bandwidth: {} is not a directory that only root can write; remove it", dir));
  const std::string pid = std::to_string(::getpid()), start = process_start_time(pid);
  const std::string pidns = link_target("/proc/self/ns/pid");
  if (start.empty() || pidns.empty())
    throw Error("--bandwidth: cannot read this process's start time or pid namespace from /proc");
  const std::string text = fmt::format("pid {}\nstart {}\npidns {}\ntoken {}\n", pid, start, pidns, token);
  const std::string path = owner_path(owner);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(fmt::format("--bandwidth: cannot write {}: {}", path, std::strerror(errno)));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (::close(fd) != 0 || !ok) {
    ::unlink(path.c_str());
    throw Error(fmt::format("--bandwidth: cannot write {}", path));
  }
}

// "frugal-<pid>-<token>-br" / "-r<rank>" -> "frugal-<pid>-<token>" (the owner); nullopt for any other
// name.
struct ParsedName {
  std::string owner, pid, token;
};
std::optional<ParsedName> parse_name(const std::string& name) {
  const std::string_view prefix = NetnsCluster::kPrefix;
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const size_t dash1 = rest.find('-');
  if (dash1 == std::string::npos) return std::nullopt;
  const size_t dash2 = rest.find('-', dash1 + 1);
  if (dash2 == std::string::npos) return std::nullopt;
  const std::string pid = rest.substr(0, dash1), token = rest.substr(dash1 + 1, dash2 - dash1 - 1);
  const std::string role = rest.substr(dash2 + 1);
  const bool hex = token.size() == 8 && std::all_of(token.begin(), token.end(), [](unsigned char c) {
                     return std::isdigit(c) || (c >= 'a' && c <= 'f');
                   });
  if (!all_digits(pid) || !hex || !(role == "br" || (role.size() > 1 && role[0] == 'r' && all_digits(role.substr(1)))))
    return std::nullopt;
  return ParsedName{fmt::format("{}{}-{}", prefix, pid, token), pid, token};
}

// Named as frugal launchers before owner records named them: frugal-<pid>-br, frugal-<pid>-r<rank>.
bool old_style_name(const std::string& name) {
  const std::string_view prefix = NetnsCluster::kPrefix;
  if (!name.starts_with(prefix)) return false;
  const std::string rest = name.substr(prefix.size());
  const size_t dash = rest.find('-');
  if (dash == std::string::npos || !all_digits(rest.substr(0, dash))) return false;
  const std::string role = rest.substr(dash + 1);
  return role == "br" || (role.size() > 1 && role[0] == 'r' && all_digits(role.substr(1)));
}

// Whether process `pid` is in the network namespace (dev, ino) and carries `owner` in its
// environment (kOwnerVariable, set by its launcher).
bool in_namespace(const std::string& pid, dev_t dev, ino_t ino) {
  struct stat st;
  return ::stat(("/proc/" + pid + "/ns/net").c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}
bool carries_owner(const std::string& pid, const std::string& owner) {
  const auto environ_text = read_small("/proc/" + pid + "/environ", 4 << 20);
  if (!environ_text) return false;
  const std::string wanted = fmt::format("{}={}", NetnsCluster::kOwnerVariable, owner);
  for (size_t start = 0; start < environ_text->size();) {
    size_t end = environ_text->find('\0', start);
    if (end == std::string::npos) end = environ_text->size();
    if (std::string_view(*environ_text).substr(start, end - start) == wanted) return true;
    start = end + 1;
  }
  return false;
}

std::string process_name(const std::string& pid) {
  auto comm = read_small("/proc/" + pid + "/comm", 256).value_or("?");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

// SIGKILL to process `pid` only if it still is in the namespace and carries the owner: the check and
// the signal go to one process (a pidfd), so a pid recycled in between is never signalled.
void kill_owned(const std::string& pid, dev_t dev, ino_t ino, const std::string& owner) {
  const pid_t p = static_cast<pid_t>(std::stol(pid));
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, p, 0));
  if (fd < 0) {
    if (errno != ENOSYS) return;  // gone
    if (in_namespace(pid, dev, ino) && carries_owner(pid, owner)) ::kill(p, SIGKILL);  // kernels before 5.3
    return;
  }
  if (in_namespace(pid, dev, ino) && carries_owner(pid, owner))
    ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
  ::close(fd);
}

}  // namespace

LinkRate parse_link_rate(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string expected =
      "expected a number and a unit of bit, kbit, mbit, gbit or tbit per second, e.g. 100mbit, 1gbit, 10gbit";
  // NUMBER UNIT with NUMBER = digits[.digits] (plain string checks: <regex> does not build cleanly
  // under GCC 12's sanitizer builds, -Werror=maybe-uninitialized inside the header).
  std::string unit;
  for (const char* u : {"tbit", "gbit", "mbit", "kbit", "bit"}) {
    if (lower.ends_with(u)) {
      unit = u;
      break;
    }
  }
  const std::string number_text = lower.substr(0, lower.size() - unit.size());
  const size_t dot = number_text.find('.');
  const auto digits = [](std::string_view d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  const bool number_ok = dot == std::string::npos
                             ? digits(number_text)
                             : digits(std::string_view(number_text).substr(0, dot)) &&
                                   digits(std::string_view(number_text).substr(dot + 1));
  if (unit.empty() || !number_ok) {
    // "100mbps": digits and dots, an optional k/m/g/t, then "bps".
    std::string_view rest(lower);
    const bool bps = rest.ends_with("bps") && rest.size() > 3;
    if (bps) rest.remove_suffix(3);
    if (bps && !rest.empty() && std::string_view("kmgt").find(rest.back()) != std::string_view::npos)
      rest.remove_suffix(1);
    if (bps && !rest.empty() &&
        std::all_of(rest.begin(), rest.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; })) {
      throw Error(fmt::format("--bandwidth {}: tc reads 'bps' as bytes per second; write the rate in "
                              "bits ({})", text, expected));
    }
    throw Error(fmt::format("--bandwidth {}: {}", text, expected));
  }
  const double number = parse_number<double>("--bandwidth", number_text, expected);
  const double scale = unit == "bit"    ? 1
                       : unit == "kbit" ? 1e3
                       : unit == "mbit" ? 1e6
                       : unit == "gbit" ? 1e9
                                        : 1e12;
  const double bps = number * scale;
  // Below ~10 kbit/s a single full-size frame takes over a second and the run only times out;
  // above 1 tbit/s tbf cannot account the rate.
  if (bps < 1e4 || bps > 1e12) {
    throw Error(fmt::format("--bandwidth {}: the rate must be between 10kbit and 1tbit", text));
  }
  return {lower, bps};
}

NetnsCluster::NetnsCluster(int ranks, const LinkRate& rate, const volatile std::sig_atomic_t* interrupted)
    : ranks_(ranks), rate_(rate) {
  if (::geteuid() != 0) {
    throw Error("--bandwidth needs root (network namespaces and tc); run as root or drop --bandwidth");
  }
  const std::string ip = find_tool("ip"), tc = find_tool("tc");
  if (ip.empty() || tc.empty()) {
    throw Error(fmt::format("--bandwidth needs `ip` and `tc` from iproute2 (apt-get install iproute2): "
                            "`{}` is not in PATH, /usr/sbin or /sbin", ip.empty() ? "ip" : "tc"));
  }
  if (ranks < 1 || ranks > kMaxRanks) {
    throw Error(fmt::format("--bandwidth supports 1 to {} ranks, not {}", kMaxRanks, ranks));
  }
  // tbf must hold at least one GSO super-packet and what the link carries per timer tick; 2 ms of
  // traffic (64 KiB at least) keeps 10gbit links near their rate without letting 100mbit links
  // burst far beyond it.
  burst_bytes_ = std::max<long>(64 * 1024, static_cast<long>(rate.bits_per_second / 8 * 0.002));
  const std::string token = new_token();
  owner_ = fmt::format("{}{}-{}", kPrefix, ::getpid(), token);
  bridge_ns_ = owner_ + "-br";
  // Recorded before the first namespace: --cleanup-stale touches only what a record names.
  write_owner_record(owner_, token);
  owner_file_ = owner_path(owner_);

  auto run = [&](const std::string& tool, std::vector<std::string> argv) {
    if (*interrupted) {
      throw Error(fmt::format("interrupted by signal {} while building the network",
                              static_cast<int>(*interrupted)));
    }
    argv.insert(argv.begin(), tool == ip ? "ip" : "tc");
    const ToolResult r = run_tool(tool, argv);
    if (r.status != 0) throw Error(explain_failure(argv, r));
  };
  auto add_netns = [&](const std::string& name) {
    created_.push_back(name);  // before the command: a half-made namespace is removed as well
    run(ip, {"netns", "add", name});
  };
  const std::string rate_text = rate.text, burst = std::to_string(burst_bytes_);
  try {
    add_netns(bridge_ns_);
    run(ip, {"-n", bridge_ns_, "link", "add", "br0", "type", "bridge"});
    run(ip, {"-n", bridge_ns_, "link", "set", "br0", "up"});
    for (int r = 0; r < ranks; ++r) {
      const std::string ns = namespace_name(r), port = fmt::format("v{}", r);
      add_netns(ns);
      // The pair is made inside the bridge namespace and its far end moved straight into the
      // rank's: no interface ever appears in the host's namespace.
      run(ip, {"-n", bridge_ns_, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns});
      run(ip, {"-n", bridge_ns_, "link", "set", port, "master", "br0", "up"});
      run(ip, {"-n", ns, "link", "set", "lo", "up"});
      run(ip, {"-n", ns, "addr", "add", address(r) + "/24", "dev", "eth0"});
      run(ip, {"-n", ns, "link", "set", "eth0", "up"});
      run(tc, {"-n", ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate_text, "burst", burst,
               "latency", "50ms"});
      run(tc, {"-n", bridge_ns_, "qdisc", "add", "dev", port, "root", "tbf", "rate", rate_text, "burst",
               burst, "latency", "50ms"});
    }
  } catch (...) {
    teardown();
    throw;
  }
}

NetnsCluster::~NetnsCluster() { teardown(); }

void NetnsCluster::teardown() noexcept {
  const std::string ip = find_tool("ip");
  bool all_gone = true;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    if (!netns_exists(*it)) continue;
    const std::vector<std::string> argv = {"ip", "netns", "del", *it};
    try {
      const ToolResult r = run_tool(ip, argv);
      if (r.status != 0) fmt::print(stderr, "frugal launch: cleanup: {}\n", explain_failure(argv, r));
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal launch: cleanup: cannot remove namespace {}: {}\n", *it, e.what());
    }
    all_gone = all_gone && !netns_exists(*it);
  }
  created_.clear();
  // A namespace left behind keeps its record: --cleanup-stale removes both once this launcher is gone.
  if (all_gone && !owner_file_.empty()) ::unlink(owner_file_.c_str());
  owner_file_.clear();
}

std::string NetnsCluster::address(int rank) const { return fmt::format("10.213.0.{}", rank + 1); }

std::string NetnsCluster::namespace_name(int rank) const { return fmt::format("{}-r{}", owner_, rank); }

std::string NetnsCluster::namespace_path(int rank) const {
  return std::string(kNetnsDir) + "/" + namespace_name(rank);
}

std::string NetnsCluster::describe(int coordinator_port) const {
  std::string s = fmt::format(
      "frugal launch: emulated network: {} ranks on bridge br0 (namespace {}), every link capped at {} "
      "in each direction (tc tbf, burst {} bytes)\n",
      ranks_, bridge_ns_, rate_.text, burst_bytes_);
  for (int r = 0; r < ranks_; ++r) {
    s += fmt::format("  rank {}  {:<11} namespace {}{}\n", r, address(r), namespace_name(r),
                     r == 0 ? fmt::format("  coordinator {}:{}", address(0), coordinator_port) : "");
  }
  return s;
}

std::vector<std::string> NetnsCluster::cleanup_stale() {
  if (::geteuid() != 0) throw Error("--cleanup-stale needs root (it deletes network namespaces)");
  const std::string ip = find_tool("ip");
  if (ip.empty()) throw Error("--cleanup-stale needs `ip` from iproute2 (apt-get install iproute2)");
  std::vector<std::string> removed;
  std::error_code ec;
  std::vector<std::string> names;
  if (std::filesystem::is_directory(kNetnsDir, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, ec))
      names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  const auto kept = [](const std::string& name, const std::string& why) {
    fmt::print(stderr, "frugal launch: --cleanup-stale: kept namespace {}: {}\n", name, why);
  };
  const std::string my_pidns = link_target("/proc/self/ns/pid");
  struct stat own_net{}, init_net{};
  ::stat("/proc/self/ns/net", &own_net);
  ::stat("/proc/1/ns/net", &init_net);
  // Whether the launcher a record names is gone: no process with its pid and start time. Records of
  // another pid namespace's launchers are not judged (their pids mean other processes here).
  const auto launcher_gone = [&](const OwnerRecord& r) {
    if (r.pidns != my_pidns) return false;
    const std::string start = process_start_time(r.pid);
    return start.empty() || start != r.start;
  };
  std::set<std::string> stale_owners;
  for (const auto& name : names) {
    const auto parsed = parse_name(name);
    if (!parsed) {
      if (old_style_name(name))
        kept(name, "named as frugal launchers named namespaces before their owner records, so not provably "
                   "a launcher's; `ip netns del " + name + "` removes it");
      continue;  // anyone else's
    }
    const auto record = read_owner_record(parsed->owner);
    if (!record || record->pid != parsed->pid || record->token != parsed->token) {
      kept(name, fmt::format("no owner record {} from a frugal launcher (a look-alike name?)", owner_path(parsed->owner)));
      continue;
    }
    if (record->pidns != my_pidns) {
      kept(name, "its launcher ran in another pid namespace: run --cleanup-stale there");
      continue;
    }
    if (!launcher_gone(*record)) continue;  // a live launcher's network
    stale_owners.insert(parsed->owner);
    // The name must be a mounted network namespace (not a link, not a plain file) and not this
    // machine's own: only then are the processes inside its ranks' kind.
    const std::string path = std::string(kNetnsDir) + "/" + name;
    struct stat link_st{}, st{};
    struct statfs fs{};
    if (::lstat(path.c_str(), &link_st) != 0 || S_ISLNK(link_st.st_mode) || ::stat(path.c_str(), &st) != 0 ||
        ::statfs(path.c_str(), &fs) != 0 || static_cast<unsigned long>(fs.f_type) != 0x6e736673ul /* NSFS_MAGIC */) {
      kept(name, "not a mounted network namespace");
      continue;
    }
    if ((st.st_dev == own_net.st_dev && st.st_ino == own_net.st_ino) ||
        (st.st_dev == init_net.st_dev && st.st_ino == init_net.st_ino)) {
      kept(name, "it is this machine's own network namespace");
      continue;
    }
    // Who is inside: the launcher's ranks (and what they started) carry its owner in their
    // environment; anything else is someone else's and is neither stopped nor cut off.
    std::vector<std::string> owned, foreign;
    if (DIR* proc = ::opendir("/proc")) {
      while (const dirent* e = ::readdir(proc)) {
        const std::string pid = e->d_name;
        if (!all_digits(pid) || !in_namespace(pid, st.st_dev, st.st_ino)) continue;
        (carries_owner(pid, parsed->owner) ? owned : foreign).push_back(pid);
      }
      ::closedir(proc);
    }
    for (const auto& pid : owned) kill_owned(pid, st.st_dev, st.st_ino, parsed->owner);
    if (!foreign.empty()) {
      std::string who;
      for (size_t k = 0; k < foreign.size() && k < 5; ++k)
        who += fmt::format("{}pid {} ({})", k ? ", " : "", foreign[k], process_name(foreign[k]));
      if (foreign.size() > 5) who += fmt::format(" and {} more", foreign.size() - 5);
      kept(name, fmt::format("{} inside, not started by its launcher, left running; stop it and run "
                             "--cleanup-stale again", who));
      continue;
    }
    const std::vector<std::string> argv = {"ip", "netns", "del", name};
    const ToolResult r = run_tool(ip, argv);
    if (r.status != 0 && netns_exists(name)) throw Error(explain_failure(argv, r));
    if (r.status == 0) removed.push_back(name);  // else another clean-up removed it first
  }
  // Records whose launcher is gone and whose namespaces are all gone (also a launcher killed before
  // it made its first namespace).
  std::vector<std::string> records;
  if (std::filesystem::is_directory(kOwnerDir, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(kOwnerDir, ec))
      records.push_back(entry.path().filename().string());
  }
  for (const auto& owner : records) {
    const auto record = read_owner_record(owner);
    if (!record || owner != fmt::format("{}{}-{}", kPrefix, record->pid, record->token) ||
        (!stale_owners.count(owner) && !launcher_gone(*record)))
      continue;
    const bool left = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.starts_with(owner + "-") && netns_exists(n);
    });
    if (!left) ::unlink(owner_path(owner).c_str());
  }
  return removed;
}

}  // namespace frugal::cli
