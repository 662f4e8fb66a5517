// StepProfile: where a training step's time goes, and how much work each part does. Every phase
// of a step (the input layer's gather, LSH hashing, the active logits, the optimizer, ...) opens a
// profile::Scope; the time between a scope's start and end, minus that of scopes nested in it,
// is charged to its phase, and the code doing the work adds its floating-point operations and the
// bytes it reads and writes (profile::count). The totals are per thread, like comm::waited_seconds:
// ranks that run as threads of one process keep separate books, and only the thread that drives a
// step opens scopes (work inside a TBB loop is counted by its caller, not by the workers).
//
// Bytes are each kernel's compulsory traffic: the distinct rows and arrays it reads or writes, once
// per call (a weight row that several points of a batch share counts once; nothing is assumed to
// stay in cache from one kernel to the next). That is the least a kernel must move, so the roofline
// built on it (`frugal bench roofline`, core/roofline.h) is a bound the step cannot beat.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace frugal::profile {

enum class Phase : unsigned char {
  input_forward,    // sparse input layer: gathered feature rows, bias, activation
  dense_layers,     // hidden dense layers, forward and backward (matrix products)
  hash,             // LSH codes of the batch's hidden vectors
  sample,           // active sets: bucket union, random negatives
  output_forward,   // the output layer's logits and softmax cross-entropy
  output_backward,  // the output layer's input gradient and its rows' gradients
  input_backward,   // sparse input layer: gradient rows of the batch's features
  optimizer,        // the optimizer's update of the touched rows
  rebuild,          // LSH table rebuilds
  compress,         // DCT: thresholding, top-k selection, encoding and merging of compressed messages
  wait,             // blocked on communication (comm::Work::wait)
  other,            // the rest of a step (gradient scaling, catch-up, exchanges' packing, ...)
};
inline constexpr size_t kPhases = static_cast<size_t>(Phase::other) + 1;
std::string_view phase_name(Phase phase);

struct PhaseTotals {
  double seconds = 0.0;
  double flops = 0.0;  // floating-point operations (an LSH compare counts as one)
  double bytes = 0.0;  // compulsory traffic, all of it
  // The part of `bytes` read at scattered positions (rows of a weight matrix picked by feature or
  // label ids, LSH buckets): held to the gather bandwidth rather than the streaming one.
  double gathered_bytes = 0.0;
};

struct StepProfile {
  std::array<PhaseTotals, kPhases> phases{};
  PhaseTotals& operator[](Phase p) { return phases[static_cast<size_t>(p)]; }
  const PhaseTotals& operator[](Phase p) const { return phases[static_cast<size_t>(p)]; }
  double seconds() const;
  StepProfile& operator+=(const StepProfile& other);
  StepProfile& operator-=(const StepProfile& other);
};

// This thread's totals since it started (phases charged so far; a scope still open is not yet).
const StepProfile& thread_totals();

// Adds work to `phase` of this thread's totals: `bytes` in all, of which `gathered_bytes` at
// scattered positions.
void count(Phase phase, double flops, double bytes, double gathered_bytes = 0.0);
// Adds work to the phase in force on this thread (the innermost open scope; `other` outside
// every scope): for code that several phases share, such as LSH hashing (sampling and rebuilds).
void count_here(double flops, double bytes, double gathered_bytes = 0.0);

// Charges the time until its destruction to `phase`, less the time of scopes opened inside it.
class Scope {
 public:
  explicit Scope(Phase phase);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase previous_;
};

}  // namespace frugal::profile
