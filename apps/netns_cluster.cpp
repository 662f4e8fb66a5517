#include "apps/netns_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
  return ::stat((std::string(kNetnsDir) + "/" + name).c_str(), &st) == 0;
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
  bridge_ns_ = fmt::format("{}{}-br", kPrefix, ::getpid());

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
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    if (!netns_exists(*it)) continue;
    const std::vector<std::string> argv = {"ip", "netns", "del", *it};
    try {
      const ToolResult r = run_tool(ip, argv);
      if (r.status != 0) fmt::print(stderr, "frugal launch: cleanup: {}\n", explain_failure(argv, r));
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal launch: cleanup: cannot remove namespace {}: {}\n", *it, e.what());
    }
  }
  created_.clear();
}

std::string NetnsCluster::address(int rank) const { return fmt::format("10.213.0.{}", rank + 1); }

std::string NetnsCluster::namespace_name(int rank) const {
  return fmt::format("{}{}-r{}", kPrefix, ::getpid(), rank);
}

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
  if (!std::filesystem::is_directory(kNetnsDir, ec)) return removed;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    // Ours are frugal-PID-br and frugal-PID-rN (see namespace_name()).
    if (!name.starts_with(kPrefix)) continue;
    const std::string rest = name.substr(std::string_view(kPrefix).size());
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) continue;
    const std::string pid_text = rest.substr(0, dash), role = rest.substr(dash + 1);
    const auto all_digits = [](const std::string& d) {
      return !d.empty() && std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    if (!all_digits(pid_text) || !(role == "br" || (role.size() > 1 && role[0] == 'r' && all_digits(role.substr(1)))))
      continue;
    const long pid = parse_number<long>(name, pid_text, "a process id");
    // Alive (or owned by someone we may not signal): not stale. A recycled pid only keeps a
    // leftover for a later cleanup; it never removes a live launcher's network.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    // Ranks of a killed launcher may still run inside (they keep the namespace alive): stop them.
    const ToolResult pids = run_tool(ip, {"ip", "netns", "pids", name});
    if (pids.status == 0) {
      for (size_t start = 0; start < pids.output.size();) {
        size_t end = pids.output.find('\n', start);
        if (end == std::string::npos) end = pids.output.size();
        const std::string p = pids.output.substr(start, end - start);
        const bool is_pid =
            !p.empty() && std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c); });
        if (is_pid) ::kill(parse_number<pid_t>("`ip netns pids`", p, "a process id"), SIGKILL);
        start = end + 1;
      }
    }
    const std::vector<std::string> argv = {"ip", "netns", "del", name};
    const ToolResult r = run_tool(ip, argv);
    if (r.status != 0) throw Error(explain_failure(argv, r));
    removed.push_back(name);
  }
  return removed;
}

}  // namespace frugal::cli
