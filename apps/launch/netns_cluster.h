// An emulated low-bandwidth cluster on one machine, for `frugal launch --bandwidth RATE`: one
// network namespace per rank, each joined by a veth pair to a bridge that lives in a namespace of
// its own (so the host's network is never touched), every veth capped with tc tbf at both ends
// (namespace side: what the rank sends; bridge side: what it receives). Built with iproute2's `ip`
// and `tc`, run by fork/exec; every command's status is checked. The destructor deletes every
// namespace, and with them the veths and the bridge inside them.
#pragma once

#include <csignal>
#include <string>
#include <vector>

namespace frugal::cli {

// A link rate as tc understands it, e.g. "100mbit": validated, normalized to lower case.
struct LinkRate {
  std::string text;
  double bits_per_second = 0;
};
// Throws frugal::Error naming what was expected ("100mbit", "1gbit", "10gbit", ...).
LinkRate parse_link_rate(const std::string& text);

class NetnsCluster {
 public:
  // Every namespace name starts with this, then the launcher's pid and a random token made for this
  // launcher: "frugal-<pid>-<token>-r<rank>" and "frugal-<pid>-<token>-br". The token keeps a later
  // launcher that gets the same pid (or a look-alike name made by anyone else) apart.
  static constexpr const char* kPrefix = "frugal-";
  // Where each launcher records what it owns, one file per launcher named "frugal-<pid>-<token>"
  // (root only, 0600): its pid, its start time (/proc/PID/stat), its pid namespace and its token.
  // --cleanup-stale acts only on namespaces whose record is there and whose launcher is gone.
  static constexpr const char* kOwnerDir = "/run/frugal-netns";
  // Set for every rank this launcher starts in a namespace, to "frugal-<pid>-<token>": the processes
  // of a namespace that carry it (the ranks and what they started) are the only ones --cleanup-stale
  // stops. Internal to the launcher (not a setting: comm/environment.h does not list it).
  static constexpr const char* kOwnerVariable = "FRUGAL_NETNS_OWNER";

  // Checks root and the tools first, then builds the network; on any failure removes what it made
  // and throws with the failing command and its output. `interrupted` is polled between commands so
  // that Ctrl-C during set-up stops it (and still cleans up).
  NetnsCluster(int ranks, const LinkRate& rate, const volatile std::sig_atomic_t* interrupted);
  ~NetnsCluster();
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  int ranks() const { return ranks_; }
  const std::string& owner() const { return owner_; }  // frugal-<pid>-<token>: kOwnerVariable's value
  std::string address(int rank) const;           // 10.213.0.<rank+1>
  std::string namespace_name(int rank) const;    // frugal-<pid>-<token>-r<rank>
  std::string namespace_path(int rank) const;    // /run/netns/frugal-<pid>-<token>-r<rank>, for setns(2)
  std::string describe(int coordinator_port) const;  // the topology, several lines

  // Deletes the namespaces frugal-<pid>-<token>-* whose owner record (kOwnerDir) names a launcher
  // that no longer runs (no process with its pid and start time: a launcher that was SIGKILLed
  // cannot clean up), after stopping the processes inside that carry kOwnerVariable with its owner.
  // Nothing else is ever signalled: a namespace with any other process inside, a name without a
  // record (an older frugal's, or anyone else's look-alike), a name that is not a mounted network
  // namespace, or one of another pid namespace's launcher is kept and said why on stderr. Returns
  // the names it deleted; throws when a deletion fails.
  static std::vector<std::string> cleanup_stale();

 private:
  void teardown() noexcept;

  int ranks_;
  LinkRate rate_;
  std::string owner_;       // frugal-<pid>-<token>
  std::string owner_file_;  // kOwnerDir/owner_, removed when every namespace is gone
  std::string bridge_ns_;
  std::vector<std::string> created_;  // namespaces that exist, in creation order
  long burst_bytes_ = 0;
};

}  // namespace frugal::cli
