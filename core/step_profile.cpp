#include "core/step_profile.h"

namespace frugal::profile {
namespace {

using Clock = std::chrono::steady_clock;

struct ThreadClock {
  StepProfile totals;
  Phase current = Phase::other;
  Clock::time_point since{};
  int depth = 0;  // open scopes; outside every scope nothing is charged

  // Charges the time since the last change to the phase in force, and restarts the clock.
  void charge(Clock::time_point now) {
    if (depth > 0) totals[current].seconds += std::chrono::duration<double>(now - since).count();
    since = now;
  }
};

thread_local ThreadClock clock_of_thread;

constexpr std::array<std::string_view, kPhases> kNames = {
    "input_forward", "dense_layers", "hash", "sample", "output_forward", "output_backward",
    "input_backward", "optimizer", "rebuild", "compress", "wait", "other"};

}  // namespace

std::string_view phase_name(Phase phase) { return kNames[static_cast<size_t>(phase)]; }

double StepProfile::seconds() const {
  double s = 0.0;
  for (const PhaseTotals& p : phases) s += p.seconds;
  return s;
}

StepProfile& StepProfile::operator+=(const StepProfile& other) {
  for (size_t i = 0; i < kPhases; ++i) {
    phases[i].seconds += other.phases[i].seconds;
    phases[i].flops += other.phases[i].flops;
    phases[i].bytes += other.phases[i].bytes;
    phases[i].gathered_bytes += other.phases[i].gathered_bytes;
  }
  return *this;
}

StepProfile& StepProfile::operator-=(const StepProfile& other) {
  for (size_t i = 0; i < kPhases; ++i) {
    phases[i].seconds -= other.phases[i].seconds;
    phases[i].flops -= other.phases[i].flops;
    phases[i].bytes -= other.phases[i].bytes;
    phases[i].gathered_bytes -= other.phases[i].gathered_bytes;
  }
  return *this;
}

const StepProfile& thread_totals() { return clock_of_thread.totals; }

void count(Phase phase, double flops, double bytes, double gathered_bytes) {
  PhaseTotals& t = clock_of_thread.totals[phase];
  t.flops += flops;
  t.bytes += bytes;
  t.gathered_bytes += gathered_bytes;
}

void count_here(double flops, double bytes, double gathered_bytes) {
  count(clock_of_thread.current, flops, bytes, gathered_bytes);
}

Scope::Scope(Phase phase) : previous_(clock_of_thread.current) {
  ThreadClock& c = clock_of_thread;
  c.charge(Clock::now());
  c.current = phase;
  ++c.depth;
}

Scope::~Scope() {
  ThreadClock& c = clock_of_thread;
  c.charge(Clock::now());
  c.current = previous_;
  --c.depth;
}

}  // namespace frugal::profile
