// A device backend's per-op profile, printed to stderr when the process exits: for each op, its
// calls, the bytes it moved each way between the host and the device, the host's time staging
// copies, its time waiting for the device and its whole time. Host clocks only, so it costs next
// to nothing and says where a step's time and traffic go without a profiler on the machine.
// FRUGAL_CUDA_PROFILE=1 turns it on for the CUDA backend (gpu/), FRUGAL_EMULATED_PROFILE=1 for the
// counting device (kernels/emulated_backend.h); the table is the same.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace frugal {

struct OpStats {
  uint64_t calls = 0, bytes_up = 0, bytes_down = 0;
  double copy_s = 0, wait_s = 0, total_s = 0;
  OpStats& operator+=(const OpStats& s) {
    calls += s.calls;
    bytes_up += s.bytes_up;
    bytes_down += s.bytes_down;
    copy_s += s.copy_s;
    wait_s += s.wait_s;
    total_s += s.total_s;
    return *this;
  }
  void print(const char* op) const {
    std::fprintf(stderr, "  %-22s %9llu %10.1f %10.1f %10.3f %10.3f %10.3f\n", op, static_cast<unsigned long long>(calls),
                 bytes_up / 1e6, bytes_down / 1e6, copy_s, wait_s, total_s);
  }
};

class OpProfile {
 public:
  // title: the table's first line; env: the variable that turns it on (set, not empty, not "0").
  OpProfile(const char* title, const char* env) : title_(title) {
    const char* e = std::getenv(env);
    on_ = e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
  }
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  bool on() const { return on_; }
  void add(const char* op, const OpStats& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_[op] += s;
  }
  ~OpProfile() {
    if (!on_ || ops_.empty()) return;
    std::vector<std::pair<std::string, OpStats>> rows(ops_.begin(), ops_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total_s > b.second.total_s; });
    OpStats all;
    std::fprintf(stderr, "%s, whole run, by op:\n", title_);
    std::fprintf(stderr, "  %-22s %9s %10s %10s %10s %10s %10s\n", "op", "calls", "MB up", "MB down", "staging s",
                 "wait s", "total s");
    for (const auto& [op, t] : rows) {
      t.print(op.c_str());
      all += t;
    }
    all.print("(all)");
  }

 private:
  const char* title_;
  bool on_ = false;
  std::mutex mutex_;
  std::map<std::string, OpStats> ops_;
};

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One op's share of a profile: its whole time from construction to destruction.
class OpTimer {
 public:
  OpTimer(OpProfile& profile, const char* op) : profile_(profile), op_(op), on_(profile.on()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~OpTimer() {
    if (!on_) return;
    stats.calls = 1;
    stats.total_s = seconds_since(start_);
    profile_.add(op_, stats);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  bool on() const { return on_; }
  OpStats stats;

 private:
  OpProfile& profile_;
  const char* op_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace frugal
