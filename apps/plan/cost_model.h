// The cost model of `frugal plan`: predicted training samples/s of a D x M grid (D data-parallel
// replicas of a group of M model-parallel ranks, one rank a node) for N nodes of C cores joined by
// links of a given rate and latency, for three schemes:
//   mp-sparse  the LSH network sliced over M ranks, replicas summing the rows they touched (exact);
//   dct-dp     the same with the replicas' gradients thresholded (--dp-keep, per-row selection);
//   dp-dense   the Horovod baseline (--parallel data): the whole dense model on every node and a ring
//              all-reduce of every gradient each step (M = 1);
//   pipeline   the layers split into S stages (--pipeline S), each sliced over M ranks, D replicas of
//              the pipeline summing the rows they touched: a D x M x S grid. Its step is the 1F1B schedule's: the first
//              micro-batch's trip through every stage and boundary and back, then one bottleneck
//              (the slowest stage's micro-batch or the slowest boundary's two messages) per further
//              micro-batch: (N - 1) x max(c_s, x_b) + sum(c_s) + sum(x_b); the idle stages of that
//              schedule are its bubble. A stage before the last recomputes its forward passes.
// A step costs compute plus wire time, less what --overlap hides (half the input layer's all-gather
// behind its other half where the input layer is split, and the input boundary's gradient
// reduce-scatter behind the optimizer of the layers above it, in grids without replicas). Compute comes
// from a 1-rank calibration run's per-phase profile: phases that slice with the model shrink by M,
// the rest (LSH hashing into each rank's own tables, the step's glue) stay whole; the global batch is
// split over the D replicas, while per-step work (table rebuilds, the optimizer over the rows the
// global batch touched) is every replica's; DCT-DP's thresholding and the collectives' copies are
// priced from probes of this machine. Wire time counts the bytes each rank sends, following the collective
// algorithms of comm/collectives.cpp (ring at and above 64 KB, direct below), over the node's link
// rate, plus one latency and one message overhead per round of messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "train/forward_split.h"

namespace frugal::plan {

enum class Scheme { mp_sparse, dct_dp, dp_dense, pipeline };
std::string_view to_string(Scheme s);  // "mp-sparse", "dct-dp", "dp-dense", "pipeline"

// A parameter of the calibrated (unsliced, 1-rank) model.
struct ParameterShape {
  std::string name;
  size_t rows = 0, cols = 0;
  // Sliced over the model ranks along rows (0) or columns (1); -1: every rank holds it whole.
  int sliced_axis = -1;
  double touched_rows_per_step = 0;  // rows with a gradient per step of the calibration batch
  bool input_layer = false;          // the sparse input layer (DCT-DP keeps --dp-keep-input of it)
  size_t layer = 0;                  // the layer it belongs to (0: input, then the hidden, the output last)
};

// Compute of one rank holding the whole model, at `threads` threads: per sample (the forward and
// backward work of each point) and per step (what a step costs whatever its batch: table rebuilds,
// and the optimizer's walk over the touched rows).
struct Calibration {
  size_t batch = 0;
  int threads = 1;
  double sliced_seconds_per_sample = 0;      // phases that shrink with the slice
  double replicated_seconds_per_sample = 0;  // phases every model rank does whole
  double rebuild_seconds_per_step = 0;       // LSH table rebuilds: the slice's tables
  double optimizer_seconds_per_step = 0;     // the touched rows of the calibration batch
  double input_forward_seconds_per_sample = 0;  // the input layer's forward (part of the sliced phases)
  double input_multiply_adds_per_sample = 0;    // its work, the whole layer's (the profile's flops / 2)
  std::vector<size_t> boundaries;            // activations per sample at each sliced layer's output
  // Per layer (input, hidden..., output): the seconds per sample of its forward and backward
  // passes, and of its forward pass alone (what a pipeline stage recomputes); the step's glue
  // (`other`) shared out by those times. Every stage also reads each batch: stage_seconds_per_sample.
  std::vector<double> layer_seconds_per_sample, layer_forward_seconds_per_sample;
  double stage_seconds_per_sample = 0;
  // The same per-layer times measured at a smaller batch (a second calibration run at the same
  // threads; small_batch 0: none): a pipeline's micro-batches are priced between the two, each
  // layer's time per sample as a + b / rows (a per-call cost spread over the rows).
  size_t small_batch = 0;
  std::vector<double> small_layer_seconds_per_sample, small_layer_forward_seconds_per_sample;
  bool sliced_softmax = true;                // the output layer is sliced: a normalizer per step
  std::vector<ParameterShape> parameters;
  // The exchanges' settings (the run's flags): DCT-MP keep and value bytes, DCT-DP keep fractions.
  double mp_keep = 1.0;
  double mp_value_bytes = 4.0;  // f32 4, bf16 2, i8 1
  double dp_keep = 0.02;        // for dct-dp
  double dp_keep_input = 0.05;
  double dp_value_bytes = 2.0;  // bf16
};

// The dense baseline: compute of the whole dense model on one rank, per sample and per step (its
// optimizer moves every row every step).
struct DenseCalibration {
  size_t batch = 0;
  int threads = 1;
  double seconds_per_sample = 0;
  double seconds_per_step = 0;
  std::vector<size_t> parameter_floats;  // one all-reduce each
};

// CPU costs a 1-rank run cannot show, measured on this machine (apps/plan/plan_probes.h), at one thread.
struct CpuCosts {
  double compress_seconds_per_entry = 0;    // DCT-DP: per touched entry thresholded and encoded
  double merge_seconds_per_entry = 0;       // DCT-DP: per received entry decoded and added
  double collective_seconds_per_byte = 0;   // copies and reductions per byte a rank sends
};

// How compute scales with cores: Amdahl's law with this serial fraction (0: linear), fitted from
// calibration runs at two thread counts when there are.
struct ThreadScaling {
  double serial_fraction = 0.0;
  // Relative speed on `cores` cores against one: cores below 1 mean a share of a core (ranks that
  // oversubscribe a host) and scale linearly.
  double speed(double cores) const;
  // The serial fraction that makes one run at t1 threads taking s1 and another at t2 taking s2
  // consistent (clamped to [0, 1]).
  static ThreadScaling fit(int t1, double s1, int t2, double s2);
  // The cores (a fraction below one) that give relative speed `s`: speed(cores_for_speed(s)) == s.
  double cores_for_speed(double s) const;
  // The cores each of `ranks` ranks of `threads` threads has on one host of `host_cores` cores.
  // Up to one rank a core, each has its share to itself: processes share no serial part, so the
  // fitted serial fraction (one process's threads) does not apply between them, and two 1-thread
  // ranks on 2 cores each compute a half slice in half the 1-rank time (bench/REPORT.md, "Ranks
  // that share a host, in the cost model"). With more ranks than cores they take turns, and every phase that
  // ends in a collective waits for a peer that is not running: each gets 1/R of what the host's
  // cores reach together under the fit, which reproduced the measured 4-ranks-on-2-cores points.
  double rank_cores(double host_cores, int ranks, int threads) const;
};

struct Link {
  double bytes_per_s = 125e6;  // 1 Gbit/s
  double latency_s = 50e-6;    // one way, per round of messages
};

// The most nodes a plan is made for (CostModel::all_grids checks its cluster against it).
constexpr int kMaxClusterNodes = 1 << 20;

struct Cluster {
  int nodes = 1;
  double cores = 1;  // per node (one rank a node); a fraction: ranks sharing a host's cores
  Link link;
  // Above 0: the nodes are ranks sharing one host of this many cores (a validated run on one
  // machine). A pipeline's stages then each compute at `cores` (a stage alone gets its threads'
  // cores while the others wait) and the host's cores bound their sum; the other schemes keep
  // every rank busy at once and take `cores` as each rank's share (ThreadScaling::rank_cores).
  double host_cores = 0;
};

struct ModelOptions {
  // frugal train's --overlap (on by default): the input layer's output is all-gathered in two halves,
  // the first while the second is computed; without replicas, the layers above the input are moved
  // while the input boundary's gradient reduce-scatter is in flight, hiding up to their optimizer time.
  bool overlap = true;
  train::ForwardSplit forward_split = train::ForwardSplit::automatic;  // --overlap-forward
  // Software cost of one round of messages on top of the link's latency (ZeroMQ's hand-offs:
  // bench/comm's small-message all-gather on loopback).
  double message_overhead_s = 200e-6;
  size_t ring_threshold_bytes = 64 << 10;  // CollectiveTuning's defaults
  size_t segment_bytes = 1 << 20;
  size_t frame_header_bytes = 56;  // comm/frame.h kFrameHeaderBytes
};

// What one rank sends in a step, and in how many rounds of messages.
struct WireCost {
  double bytes = 0;
  double rounds = 0;
  WireCost& operator+=(const WireCost& o) {
    bytes += o.bytes;
    rounds += o.rounds;
    return *this;
  }
};

struct Prediction {
  Scheme scheme = Scheme::mp_sparse;
  int data = 1, model = 1;  // the grid
  int stages = 1;           // pipeline stages (the grid D x M x S)
  size_t micro_batches = 0;               // pipeline: per batch
  std::vector<size_t> stage_split;        // pipeline: layers per stage
  double bubble_fraction = 0;             // pipeline: the stage time the schedule leaves idle
  double compute_seconds_per_step = 0;
  double wire_seconds_per_step = 0;
  double bytes_per_step_per_rank = 0;
  double overlapped_seconds_per_step = 0;  // wire time hidden behind computation (--overlap)
  double samples_per_s = 0;
  std::vector<double> slice_weights;  // the model ranks' shares of each sliced layer
};

// Bytes and rounds of one collective over `ranks` ranks, as comm/collectives.cpp sends them.
WireCost all_gather_cost(double total_bytes, int ranks, const ModelOptions& o);
WireCost all_reduce_cost(double bytes, int ranks, const ModelOptions& o);
WireCost reduce_scatter_cost(double total_bytes, int ranks, const ModelOptions& o);
// Every rank sends its own message of `bytes` to every other (exchange_bytes, all_gather_bytes).
WireCost exchange_cost(double bytes, int ranks, const ModelOptions& o);

// Rows of `rows` touched by `points` points when `touched` of them are touched by `calibrated`
// points, each point touching rows independently and uniformly (an upper bound for skewed data).
double touched_rows_at(double rows, double touched, double calibrated, double points);

// The varint bytes of the gaps between `entries` sorted positions among `dim` (codec.h).
double index_bytes_per_entry(double dim, double entries);

class CostModel {
 public:
  CostModel(Calibration sparse, ThreadScaling scaling, ModelOptions options = {}, CpuCosts cpu = {});
  void set_dense(DenseCalibration dense) { dense_ = std::move(dense); has_dense_ = true; }
  bool has_dense() const { return has_dense_; }
  const Calibration& sparse() const { return sparse_; }

  // One grid of one scheme; the cluster's nodes must equal data x model.
  Prediction predict(Scheme scheme, int data, int model, const Cluster& cluster, size_t batch = 0) const;
  // A pipeline of `stages` stages (layers per stage `split`, empty: balanced by the calibration's
  // layer times), each sliced over `model` ranks, `data` replicas of it, `micro` micro-batches (0:
  // frugal train's default).
  Prediction predict_pipeline(int data, int model, int stages, size_t micro, std::vector<size_t> split,
                              const Cluster& cluster, size_t batch = 0) const;
  // Per-layer seconds per sample (forward and backward, forward alone) at `rows` points a call: the
  // calibration's, or between it and the small-batch one (Calibration::small_batch).
  std::pair<std::vector<double>, std::vector<double>> layer_seconds_at(double rows) const;
  // Every D x M grid with D x M = nodes, for every scheme the calibration covers, and every pipeline
  // D x 1 x S with S stages (2 to the layer count) dividing the nodes.
  std::vector<Prediction> all_grids(const Cluster& cluster, size_t batch = 0) const;

  // Parts of a step, exposed for tests and the report.
  double compute_seconds(Scheme scheme, int data, int model, double cores, size_t batch) const;
  WireCost model_parallel_wire(int data, int model, size_t batch) const;
  // The same for the sliced boundaries [first, end) of the calibration's layers (and the softmax
  // normalizer with `normalizer`); `split_input`: the input boundary's all-gather in two halves;
  // `forward_only`: the activations' exchanges alone (a pipeline stage's recomputed forward pass).
  WireCost slice_wire(size_t first, size_t end, bool normalizer, int data, int model, size_t batch,
                      bool split_input, bool forward_only) const;
  // What --overlap hides of a step (0 with DCT-MP or a single model rank): the first half of the
  // input boundary's all-gather, at most the input layer's time on the second half; and without
  // replicas the input boundary's reduce-scatter, at most the optimizer's time above the input.
  double overlapped_seconds(Scheme scheme, int data, int model, double cores, size_t batch, const Link& link) const;
  // Whether the input layer's forward pass goes in two halves (--overlap, --overlap-forward, and
  // with auto the trainer's rule on the calibration's multiply-adds per point over M slices).
  bool splits_forward(int data, int model, size_t batch) const;
  // Whether the model-parallel boundaries take the exact exchange (every activation kept, f32 on
  // the wire: all-gather and reduce-scatter, both overlaps) rather than DCT-MP's (--mp-keep below
  // 1 or a narrow --mp-wire-dtype: runs whole).
  bool exact_model_exchange() const;
  WireCost replica_wire(Scheme scheme, int data, int model, size_t batch) const;
  // Entries (rows x columns, summed over the parameters) of one rank's slice that `points` points touch;
  // without_input: the parameters above the input layer only.
  double touched_entries(int model, double points, bool without_input = false) const;

 private:
  double wire_seconds(const WireCost& w, const Link& link) const;

  Calibration sparse_;
  ThreadScaling scaling_;
  ModelOptions options_;
  CpuCosts cpu_;
  DenseCalibration dense_;
  bool has_dense_ = false;
};

}  // namespace frugal::plan
