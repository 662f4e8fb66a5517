// Multi-process tests: real processes, real TCP, kill -9, and `frugal launch`.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

#include <fmt/format.h>

#include "zmq_harness.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE(v != nullptr);
  return v;
}

struct Proc {
  pid_t pid;
  int out;  // stdout+stderr
  std::string text;
};

Proc start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(p[1]);
  return {pid, p[0], {}};
}

// Reads until `needle` appears in the output or the deadline passes; false on timeout or EOF.
bool read_until(Proc& p, const std::string& needle, Clock::time_point deadline) {
  while (p.text.find(needle) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{p.out, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(p.out, buf, sizeof buf);
    if (n <= 0) return p.text.find(needle) != std::string::npos;
    p.text.append(buf, static_cast<size_t>(n));
  }
  return true;
}

int finish(Proc& p) {
  read_until(p, "\x01never", Clock::now() + std::chrono::seconds(60));  // drain to EOF
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  ::close(p.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Starts `size` comm_worker ranks of one group (coordinator on a free local port) with the given
// scenario arguments and peer timeout.
std::vector<Proc> start_group(int size, const std::vector<std::string>& args, int timeout_s) {
  const std::string coordinator = fmt::format("127.0.0.1:{}", frugal::comm::testing::free_port());
  std::vector<std::string> argv{env_or_fail("COMM_WORKER")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<Proc> procs;
  for (int r = 0; r < size; ++r) {
    procs.push_back(start(argv, {{"FRUGAL_RANK", std::to_string(r)}, {"FRUGAL_SIZE", std::to_string(size)},
                                 {"FRUGAL_COORDINATOR", coordinator},
                                 {"FRUGAL_COMM_TIMEOUT", std::to_string(timeout_s)}}));
  }
  return procs;
}

}  // namespace

TEST_CASE("procs: kill -9 of one rank mid all-reduce fails the others within 2x the timeout") {
  const int timeout_s = 2;
  std::vector<Proc> procs = start_group(3, {"allreduce-loop"}, timeout_s);
  for (auto& p : procs) REQUIRE(read_until(p, "ready", Clock::now() + std::chrono::seconds(60)));
  ::kill(procs[2].pid, SIGKILL);
  const auto killed = Clock::now();
  for (int r = 0; r < 2; ++r) {
    // "No hang": the survivor must report within 2x the timeout of the kill.
    const bool reported = read_until(procs[r], "FAILED:", killed + std::chrono::seconds(2 * timeout_s));
    const double after = std::chrono::duration<double>(Clock::now() - killed).count();
    INFO("rank " << r << " output:\n" << procs[r].text << "\n(" << after << " s after the kill)");
    CHECK(reported);
    CHECK_THAT(procs[r].text, Catch::Contains("rank 2 unreachable since"));
  }
  for (int r = 0; r < 2; ++r) CHECK(finish(procs[r]) == 1);
  CHECK(finish(procs[2]) == 128 + SIGKILL);
}

// Peers that crash (no goodbye) while this rank still sends to them: its all-gather lends its own
// memory to a frame for every peer (SendLoans), and those frames stay queued for the dead peers.
// Each silent peer's link must be dropped, which releases them, or the failed all-gather waits for
// them forever (dropping only the first silent peer hung here).
TEST_CASE("procs: a rank whose peers all crashed reports the failure instead of waiting for its frames") {
  const int timeout_s = 2;
  std::vector<Proc> procs = start_group(3, {"orphan", "2"}, timeout_s);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " output:\n" << procs[r].text);
    CHECK(read_until(procs[r], "exiting", Clock::now() + std::chrono::seconds(60)));
    CHECK(finish(procs[r]) == 0);
  }
  const auto gone = Clock::now();
  const bool reported = read_until(procs[2], "FAILED:", gone + std::chrono::seconds(3 * timeout_s));
  INFO("rank 2 output:\n" << procs[2].text << "\n("
       << std::chrono::duration<double>(Clock::now() - gone).count() << " s after the others exited)");
  CHECK(reported);
  CHECK_THAT(procs[2].text, Catch::Contains("unreachable since"));
  if (!reported) ::kill(procs[2].pid, SIGKILL);
  CHECK(finish(procs[2]) == (reported ? 1 : 128 + SIGKILL));
}

// A rank stopped (SIGSTOP) while the others fail and exit without a goodbye finds, once continued,
// every peer gone. Its collectives send its own memory without a copy (SendLoans): the frames it
// queues for the dead peers must be dropped for each of them, or its failed all-gather (a frame to
// every peer) waits for them forever. It must report within 2x the timeout of being continued.
TEST_CASE("procs: a stopped rank continued after its peers died reports the failure instead of hanging") {
  const int timeout_s = 2;
  std::vector<Proc> procs = start_group(3, {"allgather-loop"}, timeout_s);
  for (auto& p : procs) REQUIRE(read_until(p, "ready", Clock::now() + std::chrono::seconds(60)));
  ::kill(procs[2].pid, SIGSTOP);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " output:\n" << procs[r].text);
    CHECK(read_until(procs[r], "FAILED:", Clock::now() + std::chrono::seconds(4 * timeout_s)));
    CHECK(finish(procs[r]) == 1);  // exited: its sockets are closed, and it said no goodbye
  }
  ::kill(procs[2].pid, SIGCONT);
  const auto continued = Clock::now();
  const bool reported = read_until(procs[2], "FAILED:", continued + std::chrono::seconds(2 * timeout_s));
  INFO("rank 2 output:\n" << procs[2].text << "\n("
       << std::chrono::duration<double>(Clock::now() - continued).count() << " s after SIGCONT)");
  CHECK(reported);
  CHECK_THAT(procs[2].text, Catch::Contains("unreachable since"));
  if (!reported) ::kill(procs[2].pid, SIGKILL);
  CHECK(finish(procs[2]) == (reported ? 1 : 128 + SIGKILL));
}

TEST_CASE("procs: frugal launch runs N ranks, prefixes their output, passes the cluster key") {
  const std::string frugal = env_or_fail("FRUGAL_EXE"), worker = env_or_fail("COMM_WORKER");
  Proc p = start({frugal, "launch", "-n", "3", "--", worker, "collectives"}, {});
  const int code = finish(p);
  INFO(p.text);
  CHECK(code == 0);
  for (int r = 0; r < 3; ++r) CHECK_THAT(p.text, Catch::Contains(fmt::format("[{}] rank {} ok (3 ranks, zmq)", r, r)));

  const std::string key = fmt::format("/tmp/frugal-test-key-{}", ::getpid());
  ::unlink(key.c_str());
  Proc kg = start({frugal, "keygen", "-o", key}, {});
  REQUIRE(finish(kg) == 0);
  Proc keyed = start({frugal, "launch", "-n", "2", "--cluster-key", key, "--", worker, "collectives"}, {});
  const int keyed_code = finish(keyed);
  ::unlink(key.c_str());
  INFO(keyed.text);
  CHECK(keyed_code == 0);
  CHECK_THAT(keyed.text, Catch::Contains("[1] rank 1 ok (2 ranks, zmq)"));
}

TEST_CASE("procs: frugal launch stops the other ranks when one fails and exits non-zero") {
  const std::string frugal = env_or_fail("FRUGAL_EXE"), worker = env_or_fail("COMM_WORKER");
  {
    // The others would sleep for 10 minutes: only the launcher stopping them ends this quickly.
    Proc p = start({frugal, "launch", "-n", "3", "--grace", "2", "--", "/bin/sh", "-c",
                    "if [ $FRUGAL_RANK = 1 ]; then echo bye; exit 3; fi; exec sleep 600"}, {});
    const int code = finish(p);
    INFO(p.text);
    CHECK(code == 3);
    CHECK_THAT(p.text, Catch::Contains("[1] bye"));
    CHECK_THAT(p.text, Catch::Contains("rank 1 exited with status 3; stopping the other ranks"));
  }
  {
    // Communicating ranks: the others notice that rank 1 left; the launcher exits non-zero.
    Proc p = start({frugal, "launch", "-n", "3", "--", worker, "exit-after", "1", "3"}, {});
    const int code = finish(p);
    INFO(p.text);
    CHECK(code != 0);
    CHECK_THAT(p.text, Catch::Contains("stopping the other ranks"));
  }
}

TEST_CASE("procs: frugal launch --transport mpi runs the same program under mpirun") {
  const std::string frugal = env_or_fail("FRUGAL_EXE"), worker = env_or_fail("COMM_WORKER");
  Proc p = start({frugal, "launch", "-n", "2", "--transport", "mpi", "--", worker, "collectives"}, {});
  const int code = finish(p);
  INFO(p.text);
  CHECK(code == 0);
  CHECK_THAT(p.text, Catch::Contains("[0] rank 0 ok (2 ranks, mpi)"));
  CHECK_THAT(p.text, Catch::Contains("[1] rank 1 ok (2 ranks, mpi)"));
}
