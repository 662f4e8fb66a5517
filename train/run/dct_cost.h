// Whether DCT-DP pays on this run's link: the CPU time a step spends thresholding, encoding and
// merging (profile phase `compress`) against the wire time the bytes it saves would take at the link
// rate measured between the replicas at start-up. The bytes saved are counted against the default
// exchange without --dp-keep (the touched rows, ReplicaReducer::payload_touched), not against a
// dense all-reduce. On a fast link with little to save, thresholding costs more than it saves, and
// the run says so (bench/REPORT.md measured 13.1 vs 9.2 s per epoch at 1 Gbit).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/dct/gradient_exchange.h"
#include "core/communicator.h"
#include "train/trainer.h"

namespace frugal::run {

// Bytes per second one rank hands its peers in an all-gather (after a small warm-up gather that
// opens the connections), each rank sending about `bytes` in all: bytes / (P - 1) to each peer, at
// least 64 KB, so the probe costs about the same at any group size; on a link fast enough to move
// that in under 50 ms, doubled until a gather takes 50 ms (at most 16 MB a peer). Collective over `group`; every
// rank gets the same value (from the slowest rank's time). Call it before training, so that no
// epoch's traffic counts it.
double probe_link_rate(comm::Communicator& group, size_t bytes = size_t{1} << 20);

struct DctDpCost {
  double link_bytes_per_s = 0;             // probe_link_rate
  double cpu_seconds_per_step = 0;         // this rank's `compress` phase, per step
  double bytes_saved_per_step = 0;         // payload of the touched-rows exchange minus what was sent
  double wire_seconds_saved_per_step = 0;  // bytes_saved_per_step at the link rate
  bool pays() const { return wire_seconds_saved_per_step >= cpu_seconds_per_step; }
};

// From an epoch of this rank (fit.steps > 0) and the probed link rate.
DctDpCost dct_dp_cost(const train::FitResult& fit, double link_bytes_per_s);
nlohmann::json to_json(const DctDpCost& cost);
// The log line of a run whose compression does not pay (names the measured figures and `flag`,
// the flag that turned DCT-DP on: "--dp-keep" or "--compress auto").
std::string does_not_pay_note(const DctDpCost& cost, const std::string& flag = "--dp-keep");

// An uncompressed data-parallel exchange on this run's link: the wire time of what a step sent at
// the probed rate against the step's time outside communication waits. When the wire takes longer
// than the computation, compression would pay (`would_pay`).
struct DpExchangeCost {
  double link_bytes_per_s = 0;
  double wire_seconds_per_step = 0;     // this rank's data-parallel payload per step at the link rate
  double compute_seconds_per_step = 0;  // the step's seconds without the `wait` phase
  bool would_pay() const { return wire_seconds_per_step > compute_seconds_per_step; }
};
DpExchangeCost dp_exchange_cost(const train::FitResult& fit, double link_bytes_per_s);
nlohmann::json to_json(const DpExchangeCost& cost);
// The log line of an uncompressed run whose exchange outweighs its computation.
std::string would_pay_note(const DpExchangeCost& cost);

// --compress link (the default): whether --compress auto's DCT-DP pays on this run's link, decided
// before training from measurements. Both exchanges' costs grow with the gradient entries a step
// exchanges, so comparing them per entry decides whatever the model: the uncompressed exchange's
// all-reduce (4 bytes an entry) timed on this link, against auto's all-gather of its messages
// (their bytes an entry) timed on this link plus the CPU auto spends per entry (selecting,
// encoding, then decoding and merging P messages), measured on a synthetic gradient of normal
// values once the controller has settled. Every figure is the slowest replica's.
struct CompressChoice {
  int replicas = 0;
  double link_bytes_per_s = 0;       // probe_link_rate, for the log
  double keep = 0;                   // where the probe's controller settled
  double cpu_seconds_per_entry = 0;  // auto's CPU per gradient entry
  double wire_seconds_off_per_entry = 0, wire_seconds_auto_per_entry = 0;
  // With a margin on the CPU: the probe's gradient is not the run's, and a wrong "on" costs every
  // step's CPU.
  static constexpr double kMargin = 1.5;
  bool pays() const {
    return wire_seconds_off_per_entry > wire_seconds_auto_per_entry + kMargin * cpu_seconds_per_entry;
  }
};
// Whether every rank of `group` runs on this machine in one network namespace: their traffic never
// leaves the loopback, where compression cannot pay, and --compress link stays off without timing
// anything (timings on a loaded machine could flip the choice, and a run would not reproduce).
// Collective; every rank gets the same answer.
bool replicas_share_one_network(comm::Communicator& group);
// Collective over the replicas' group (every rank gets the same choice). `auto_options` is what
// --compress auto would run with.
CompressChoice probe_compress_choice(comm::Communicator& replicas, double link_bytes_per_s,
                                     const comm::DpCompression& auto_options);
nlohmann::json to_json(const CompressChoice& choice);
// The log line that says which it chose and why.
std::string compress_choice_note(const CompressChoice& choice);

}  // namespace frugal::run
