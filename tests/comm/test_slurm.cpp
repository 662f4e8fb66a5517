// Slurm's host list and tasks-per-node syntax, and the placement read from SLURM_* variables
// (comm/slurm.h), which is what lets `srun frugal train ...` run without a launcher.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

#include "comm/slurm.h"
#include "core/check.h"

namespace slurm = frugal::comm::slurm;
using Hosts = std::vector<std::string>;

namespace {

std::string error_of(const std::string& list) {
  try {
    slurm::expand_hostlist("SLURM_JOB_NODELIST", list);
  } catch (const frugal::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// Sets the given SLURM_* variables for one test and removes every one on the way out.
struct SlurmEnv {
  static constexpr const char* kAll[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_STEP_NODELIST",
                                         "SLURM_JOB_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                                         "SLURM_NTASKS_PER_NODE"};
  SlurmEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    clear();
    for (const auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  ~SlurmEnv() { clear(); }
  static void clear() {
    for (const char* k : kAll) ::unsetenv(k);
  }
};

}  // namespace

TEST_CASE("slurm hostlist: plain names, ranges with padding, lists, several brackets") {
  CHECK(slurm::expand_hostlist("X", "gpu5") == Hosts{"gpu5"});
  CHECK(slurm::expand_hostlist("X", "node[01-03,07],gpu5") == Hosts{"node01", "node02", "node03", "node07", "gpu5"});
  CHECK(slurm::expand_hostlist("X", "a,b,c") == Hosts{"a", "b", "c"});
  CHECK(slurm::expand_hostlist("X", "n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(slurm::expand_hostlist("X", "n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(slurm::expand_hostlist("X", "n[7]") == Hosts{"n7"});
  CHECK(slurm::expand_hostlist("X", "r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(slurm::expand_hostlist("X", "node[1-2]-ib,login") == Hosts{"node1-ib", "node2-ib", "login"});
  CHECK(slurm::expand_hostlist("X", "10.77.0.[1-2]") == Hosts{"10.77.0.1", "10.77.0.2"});
}

TEST_CASE("slurm hostlist: malformed lists fail naming the variable and the text") {
  for (const std::string bad : {"", "node[01-", "node]1", "node[3-1]", "node[a-b]", "a,,b", "node[[1]]", "n[1-2] m",
                                "[]", "n[1-99999999]"}) {
    INFO(bad);
    const std::string e = error_of(bad);
    CHECK(e.find("SLURM_JOB_NODELIST") != std::string::npos);
    CHECK(e.find("e.g. node[01-03,07],gpu5") != std::string::npos);
  }
}

TEST_CASE("slurm tasks per node: counts and repeats") {
  CHECK(slurm::expand_tasks_per_node("X", "4") == std::vector<int>{4});
  CHECK(slurm::expand_tasks_per_node("X", "2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK_THROWS_WITH(slurm::expand_tasks_per_node("SLURM_TASKS_PER_NODE", "2(x"),
                    Catch::Contains("SLURM_TASKS_PER_NODE") && Catch::Contains("e.g. 2(x3),1"));
  CHECK_THROWS(slurm::expand_tasks_per_node("X", "two"));
  CHECK_THROWS(slurm::expand_tasks_per_node("X", "2(x0)"));
}

TEST_CASE("slurm placement from the environment") {
  SECTION("not a Slurm task") {
    SlurmEnv env{{"SLURM_NTASKS", "4"}};  // an allocation's shell, not a task: no SLURM_PROCID
    CHECK_FALSE(slurm::from_environment());
  }
  SECTION("rank, size, first host of the step, tasks on this node") {
    SlurmEnv env{{"SLURM_PROCID", "3"},
                  {"SLURM_NTASKS", "5"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_JOB_NODELIST", "big[1-9]"},
                  {"SLURM_STEP_NODELIST", "node[07-08],gpu5"},
                  {"SLURM_TASKS_PER_NODE", "4(x3)"},
                  {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}};
    const auto p = slurm::from_environment();
    REQUIRE(p);
    CHECK(p->rank == 3);
    CHECK(p->size == 5);
    CHECK(p->first_host == "node07");
    CHECK(p->first_host_source == "SLURM_STEP_NODELIST");
    CHECK(p->local_size == 2);
  }
  SECTION("the job's lists when the step's are unset; --ntasks-per-node as the last resort") {
    SlurmEnv env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "gpu5"},
                  {"SLURM_NTASKS_PER_NODE", "2"}};
    const auto p = slurm::from_environment();
    REQUIRE(p);
    CHECK(p->first_host == "gpu5");
    CHECK(p->first_host_source == "SLURM_JOB_NODELIST");
    CHECK(p->local_size == 2);
  }
  SECTION("malformed values name their variable") {
    SlurmEnv env{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}};
    CHECK_THROWS_WITH(slurm::from_environment(), Catch::Contains("SLURM_PROCID 2 is not below SLURM_NTASKS 2"));
    ::setenv("SLURM_NTASKS", "many", 1);
    CHECK_THROWS_WITH(slurm::from_environment(), Catch::Contains("SLURM_NTASKS 'many'"));
    ::setenv("SLURM_NTASKS", "4", 1);
    ::setenv("SLURM_NODEID", "5", 1);
    ::setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
    CHECK_THROWS_WITH(slurm::from_environment(), Catch::Contains("SLURM_NODEID 5 is past the 2 nodes"));
  }
}
