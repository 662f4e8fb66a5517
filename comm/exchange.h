// The exchanges the trainers call, as contracts, beside their implementations in comm/ (train/ only
// calls them; no floor below comm/ needs them: DLRM's replica sums are its trainer's).
//  - ActivationExchange: one sliced-layer boundary of the model-parallel group (all-gather forward,
//    reduce-scatter backward; DCT-MP top-k when compression is asked for).
//  - ReplicaReducer: the sum of every parameter's gradient over data-parallel replicas (the dense
//    all-reduce of the Horovod scheme, the union of touched rows, or DCT-DP thresholds with error
//    feedback), as flashlight's Reducer.
//  - ExchangeFactory: makes both; the trainer (train/) calls comm/'s factory directly
//    (comm::comm_exchanges(), comm/exchange_factory.h: no registration) unless its options name
//    another (TrainerOptions::exchanges, DlrmTrainOptions::exchanges).
// The options of the compressed exchanges live here too, since TrainerOptions carries them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/placement.h"
#include "core/tensor.h"

namespace frugal {
struct Parameter;
}

namespace frugal::comm {

class Communicator;

// Value type of floats on the wire (the codec's tag values: part of the message format).
// sign: one bit per value and one f32 scale per message, every value being +scale or -scale
// (sparse messages only; what error feedback tolerates: DCT-DP sends the mean magnitude of the
// entries it selects and keeps each entry's difference in its residual).
// i8: one signed byte per value and one bf16 scale per row (comm/dct/scaled_int8.h); DCT-MP's
// activation exchange only, whose rows are samples.
enum class ValueType : uint8_t { f32 = 0, f16 = 1, bf16 = 2, sign = 3, i8 = 4 };

// DCT-DP's threshold estimator (comm/dct/thresholder.h).
struct ThresholdOptions {
  float keep = 0.01f;               // fraction of entries sent when tau is fresh, in (0, 1]
  uint64_t reestimate_every = 1;     // steps between estimates of tau (1: every step)
  bool exact = false;               // estimate tau by exact selection rather than sampling
  size_t sample_size = 10000;       // entries sampled when not exact
  uint64_t seed = 1;
  // Steps over which the kept fraction falls geometrically from everything to `keep`; tau is
  // re-estimated every step meanwhile (as DGC warms up its sparsity).
  uint64_t warmup_steps = 0;
  // Row-sparse parameters (compress_rows): each touched row sends its own top ceil(keep * cols)
  // entries instead of the entries above one tau for all of them, so a rarely touched row (a rare
  // input feature) moves each time it is touched instead of waiting behind the frequent ones.
  bool per_row = false;
  // With one tau (per_row off): a touched row none of whose entries reaches tau still sends its
  // largest one, so every row a step touches moves (the rare rows of a long tail get their share,
  // Slim-DP's exploration) while the bulk goes by the global threshold.
  bool row_floor = false;
  // DGC's momentum correction (Lin et al., ICLR 2018): the residual accumulates a local velocity
  // u = momentum * u + momentum_scale * g instead of g itself, and an entry's velocity restarts at 0
  // when the entry is sent (momentum factor masking). The optimizer then steps on the replicas' sum
  // of sent velocities with no momentum of its own, so an entry held back still moves with the
  // momentum it would have had. Row-sparse: a row's velocity moves only in steps that touch it (as
  // lazy Adam's moments do). 0: off (the residual accumulates g).
  float momentum = 0.0f, momentum_scale = 1.0f;
  // Automatic keep (`--compress auto`), 0: off. Else the kept fraction is set online, starting from
  // everything and never below `keep` (the floor), so that what is sent carries at least this
  // fraction of the energy (sum of squares) of the accumulated candidates, gradient plus residual:
  // each step the fraction falls by kAutoFall while the carried energy (smoothed over steps) is at
  // or above the target, and rises by kAutoRise when it is below (a back-off: a learning-rate
  // change, a new epoch's rare rows). tau is re-estimated every step meanwhile.
  float auto_energy = 0.0f;
  // Slim-DP's exploration (Sun et al., 2018): besides the entries the threshold selects, each other
  // candidate entry is sent with probability `explore` (drawn from the thresholder's seeded
  // generator), so that no coordinate's residual waits behind the large ones indefinitely. Values,
  // not signs. 0: off.
  float explore = 0.0f;
  static constexpr float kAutoFall = 0.95f, kAutoRise = 1.25f;
  // Weight of a step's measurement in the smoothed carried energy.
  static constexpr double kAutoSmoothing = 0.2;
  void validate() const;
  // The fraction kept at 0-based step `step` (without auto_energy).
  float keep_at(uint64_t step) const;
};

// Everything a thresholder carries from step to step, for checkpoints: a resumed run continues
// with the same residual, tau and schedule.
struct ThresholderState {
  std::vector<float> residual;
  std::vector<float> velocity;  // ThresholdOptions::momentum's velocity (empty without it)
  float tau = 0.0f;
  uint64_t steps = 0;
  bool estimate_pending = false;
  uint64_t rng = 0;
  // ThresholdOptions::auto_energy's controller: the kept fraction, the smoothed carried energy,
  // and how many steps raised the fraction (back-offs) so far.
  float auto_keep = 1.0f;
  double carried_energy = 1.0;
  uint64_t backoffs = 0;
};

// Where DCT-MP's backward adds a rank's own gradient share at the positions its mask dropped.
enum class StraightThrough : uint8_t { off = 0, input = 1, all = 2 };
const char* to_string(StraightThrough mode);  // "off", "input", "all" (the --mp-straight-through names)

// DCT-MP: what crosses each sliced-layer boundary of the model group.
struct MpCompression {
  // Activations kept per sample and slice: a fraction of the slice's width when <= 1, else a
  // count (at most the slice's width). 1: keep everything.
  double keep = 1.0;
  ValueType wire = ValueType::f32;
  // Steps over which the kept fraction falls geometrically from everything to `keep` (as Deep
  // Gradient Compression warms up its sparsity). Without it, a freshly initialized network's top-k
  // picks the same few units for every sample and, on sparse inputs, can collapse into them.
  uint64_t warmup_steps = 0;
  // Adaptive k: each sample keeps the fewest of its top-k activations whose magnitudes cover this
  // fraction of its slice's L1 mass (a sample whose mass sits in a few units sends only those;
  // `keep` is then the cap). 1: off, every sample keeps exactly k.
  double mass = 1.0;
  // Backward, this rank's own share of the gradient reaches every unit of its slice, kept or not
  // (a straight-through estimate of the mask, from what is local and so free to send): units the
  // mask dropped still learn, instead of the first winners staying the only ones (on the synthetic
  // XMC network with hidden 512, K = 10%: -1.9 points without, -0.05 with; bench/REPORT.md).
  // input: at the input layer's boundary only (the estimate's bias then reaches that layer's
  // weights alone; through stacked hidden boundaries it compounds: Fashion-MNIST's MLP on 4 ranks
  // lost 0.8 points with `all`); off: the exact gradient of the masked network.
  StraightThrough straight_through = StraightThrough::input;
  // Steps (from 0) during which the straight-through estimate applies; 0: the whole run.
  uint64_t straight_through_steps = 0;
  // Error feedback for the activation gradients (Optimus-CC's lazy error propagation): what a rank's
  // backward message did not carry to a peer (its share at the positions the peer's mask dropped,
  // and the rounding of the values it sent) is kept per (batch row, position) and added to its
  // share at the same row and position in the next step. The next step's row is another sample:
  // the feedback conserves the gradient's mass over steps, not per sample. Not kept in checkpoints
  // (a resumed run starts it from zero).
  bool error_feedback = false;
  void validate() const;
  // Whether the straight-through estimate applies at training step `step`.
  bool straight_through_at(uint64_t step) const {
    return straight_through != StraightThrough::off && (straight_through_steps == 0 || step < straight_through_steps);
  }
  // Positions kept (at most, when adaptive) of a slice of `width` neurons (>= 1) at training step `step`.
  size_t kept_of(size_t width, uint64_t step = UINT64_MAX) const;
};

// What DCT-DP thresholds and exchanges between replicas.
//  - gradients: each replica's gradient; the optimizer then steps once on the sum. Error feedback
//    releases an entry's accumulated gradient in one burst, and Adam's per-entry normalization
//    turns that burst into one ordinary-sized step (an entry sent every n steps moves ~sqrt(n)
//    times too little), so Adam trains poorly at small keep fractions.
//  - updates: each replica runs the optimizer on its own gradient (its moments stay local) and the
//    replicas threshold and average the resulting weight changes, with error feedback on those.
//    The optimizer sees every step's gradient, so no normalization undoes the feedback; the
//    replicas' weights stay bitwise identical (they apply the same averaged sum). Not exact even
//    at keep 1 (the mean of P local steps, not one step on the summed gradient).
enum class DpTarget : uint8_t { gradients = 0, updates = 1 };
const char* to_string(DpTarget target);  // "gradients", "updates" (the --dp-compress names)

// A keep fraction for the parameters whose names start with `prefix` ("softmax.", "sparse_dense.weight").
struct KeepOverride {
  std::string prefix;
  float keep = 1.0f;
};

// DCT-DP: each replica thresholds its gradients (error feedback) and sends only what passes.
struct DpCompression {
  float keep = 1.0f;                 // fraction sent when tau is fresh; 1: uncompressed (exact)
  uint64_t reestimate_every = 1;     // steps between estimates of tau (a stale one lets residuals outgrow it)
  bool exact_tau = false;            // exact selection instead of sampling
  size_t sample_size = 10000;        // entries sampled when not exact
  ValueType wire = ValueType::f32;   // value type on the wire (rounding error is fed back)
  uint64_t seed = 1;                 // of the tau sampler; split it per rank and parameter
  DpTarget target = DpTarget::gradients;
  uint64_t warmup_steps = 0;         // ThresholdOptions::warmup_steps
  bool per_row = false;              // ThresholdOptions::per_row
  bool row_floor = false;            // ThresholdOptions::row_floor
  // DGC's momentum correction (ThresholdOptions::momentum, gradients only): the Trainer moves the
  // optimizer's momentum into each replica's thresholder (Adam's beta1 with scale 1 - beta1, SGD's
  // momentum with scale 1: momentum and momentum_scale below) and runs the optimizer without it.
  bool momentum_correction = false;
  float momentum = 0.0f, momentum_scale = 1.0f;  // what the thresholders get (0: none)
  // DGC's local gradient clipping (with TrainerOptions::clip_norm, gradients only): each replica
  // clips its own gradient to clip_norm / sqrt(replicas) before thresholding, instead of the sum
  // after the exchange (where clipping would scale released residual bursts).
  bool local_clipping = false;
  // Per-parameter keep fractions: the first override whose prefix starts a parameter's name sets
  // its keep (the output layer's rows and the input layer's need not lose alike); others use `keep`.
  std::vector<KeepOverride> per_parameter{};
  // ThresholdOptions::auto_energy (--compress auto): each parameter's keep set online, with its
  // keep (keep_for) as the floor. 0: off.
  float auto_energy = 0.0f;
  float explore = 0.0f;  // ThresholdOptions::explore (--dp-explore); 0: off
  void validate() const;
  float keep_for(std::string_view parameter) const;
};

// One sliced-layer boundary. The producing layer computes B x w_r activations on rank r; the next
// layer needs all B x H of them.
class ActivationExchange {
 public:
  virtual ~ActivationExchange() = default;
  // Sets the kept counts of the warm-up schedule at training step `step` (same on every rank).
  virtual void set_step(uint64_t step) = 0;
  // local (B x w_me) -> the whole (masked) layer output (B x H), identical on every rank.
  virtual const Tensor& gather(const Tensor& local) = 0;
  // gather in row parts, so that the caller computes later rows while earlier ones travel. Where
  // gathers_in_parts() (after set_step), call gather_rows(local, first, count) for consecutive parts
  // covering [0, B) in order, each once its rows of `local` (B x w_me) are final; `local` stays
  // alive, and its finished rows unchanged, until finish_gather(local), which returns what
  // gather(local) returns, the same bits. The default (and a compressed exchange) gathers whole at
  // the finish.
  virtual bool gathers_in_parts() const { return false; }
  virtual void gather_rows(const Tensor& /*local*/, size_t /*first*/, size_t /*count*/) {}
  virtual const Tensor& finish_gather(const Tensor& local) { return gather(local); }
  // After a failure between the parts: waits for the part in flight (its own error dropped: the
  // caller is already failing) so that no collective still reads `local` or writes this exchange.
  virtual void abandon_gather() {}
  // partial (B x H): this rank's share of dLoss/dOutput of the whole layer -> the group's sum on
  // this rank's slice (B x w_me), zero at positions the forward pass dropped.
  virtual const Tensor& reduce_scatter(const Tensor& partial) = 0;
  // reduce_scatter in two parts, so that the caller computes while the exchange is in flight:
  // start_reduce_scatter(partial) begins it (`partial` stays alive and unchanged until the finish),
  // finish_reduce_scatter() returns what reduce_scatter(partial) returns, the same bits. The default
  // does it all at the start.
  virtual void start_reduce_scatter(const Tensor& partial) { started_ = &reduce_scatter(partial); }
  virtual const Tensor& finish_reduce_scatter() { return *started_; }
  // full (B x H): dLoss/dOutput already summed (a replicated consumer) -> this rank's slice,
  // masked like reduce_scatter's result.
  virtual const Tensor& own_slice(const Tensor& full) = 0;
  // Cumulative payload of this rank: bytes handed to the communicator times the peers each goes
  // to, and what the uncompressed f32 exchange would have handed over.
  virtual uint64_t payload_sent() const = 0;
  virtual uint64_t payload_uncompressed() const = 0;

 private:
  const Tensor* started_ = nullptr;  // the default start_reduce_scatter's result
};

// A pipeline stage boundary (`frugal train --pipeline S`): the producing stage's last layer's
// output for one micro-batch goes to the next stage over point-to-point messages, and its gradient
// comes back. With MpCompression it is DCT-MP's boundary between two ranks: each sample keeps its
// top-k activations (positions gap-coded, values f32 / bf16 / f16 / scaled int8) and the gradient
// travels at those positions only (no indices), optionally with error feedback (Optimus-CC's lazy
// error propagation: what the backward message did not carry is added to the next one). Each side
// keeps the positions of every micro-batch in flight until its backward is done. With every
// position kept and f32 values it sends the activations and gradients as they are (exact).
class StageLink {
 public:
  virtual ~StageLink() = default;
  // The kept counts of the warm-up schedule at training step `step` (the same on both sides).
  virtual void set_step(uint64_t step) = 0;
  // Producer: sends micro-batch `micro`'s activations (B x width) to the next stage.
  virtual void send_forward(const Tensor& activations, size_t micro) = 0;
  // Producer: dLoss/d(activations) of micro-batch `micro` (B x width), zero where not kept.
  virtual const Tensor& recv_backward(size_t micro) = 0;
  // Consumer: micro-batch `micro`'s activations as the next stage's input (zero where not kept).
  virtual const Tensor& recv_forward(size_t micro) = 0;
  // Consumer: sends dLoss/d(input) of micro-batch `micro` back (at the kept positions).
  virtual void send_backward(const Tensor& gradient, size_t micro) = 0;
  // Forgets the positions of micro-batches whose backward will not come (evaluation passes).
  virtual void forget(size_t micro) = 0;
  // Sends do not wait for the peer (a 1F1B schedule would deadlock where a transport's send
  // completes only once the peer receives): this waits for those in flight, and rethrows their error.
  virtual void wait_sends() = 0;
  // Payload this side handed to the communicator, and what the uncompressed f32 exchange would have.
  virtual uint64_t payload_sent() const = 0;
  virtual uint64_t payload_uncompressed() const = 0;
};

// How replicas sum their gradients.
enum class ReduceMode {
  touched_rows,  // the union of the rows some replica touched, summed (exact, the default)
  dense,         // every parameter in full, every step (the Horovod scheme, the baseline)
  thresholded,   // DCT-DP: each replica sends what passes its threshold (needs `dp`)
};

struct ReducerOptions {
  ReduceMode mode = ReduceMode::touched_rows;
  DpCompression dp{};  // ReduceMode::thresholded only
  // ReduceMode::dense: after the sum, a gradient lists only the rows whose sum is not zero (the rows
  // some replica used: what lazy updates of an embedding table need, as one rank on the whole batch
  // would list them), rather than every row.
  bool list_summed_rows = false;
};

// Sums the gradients of a fixed list of parameters over the replicas of one group.
class ReplicaReducer {
 public:
  virtual ~ReplicaReducer() = default;
  // Replaces every parameter's row-sparse gradient (Parameter::grad) by the sum over the replicas,
  // bitwise identical on every replica. Collective: every replica calls it each step.
  virtual void reduce() = 0;
  // Cumulative payload of this rank, and what the dense ring all-reduce of every parameter would
  // have sent (ring_all_reduce_bytes, core/comm_stats.h).
  virtual uint64_t payload_sent() const = 0;
  virtual uint64_t payload_uncompressed() const = 0;
  // What the exact touched-rows exchange (the default without DCT-DP) would have sent for the same
  // gradients: each step, this rank's touched entries in a ring all-reduce (the least it would
  // send; the union over the replicas is larger). What --dp-keep saves is measured against it.
  virtual uint64_t payload_touched() const { return payload_sent(); }
  // Error-feedback state carried between steps (DCT-DP), one per parameter in order; none for the
  // exact modes. Checkpoints save and restore it.
  virtual size_t feedback_states() const { return 0; }
  virtual size_t feedback_size(size_t /*param*/) const { return 0; }
  virtual ThresholderState feedback_state(size_t param) const;
  virtual void restore_feedback(size_t param, const ThresholderState& state);
  // The automatic keep (ThresholdOptions::auto_energy, `--compress auto`) of parameter `param`:
  // the fraction its next step keeps, the smoothed energy its messages carry, and its back-offs so
  // far (1, 1, 0 where nothing is thresholded), without copying its residual.
  struct AutoKeep {
    float keep = 1.0f;
    double carried_energy = 1.0;
    uint64_t backoffs = 0;
  };
  virtual AutoKeep auto_keep(size_t /*param*/) const { return {}; }
};

class ExchangeFactory {
 public:
  virtual ~ExchangeFactory() = default;
  // `placement`: the producing layer's (sliced over the model group); `width`: its whole output
  // width H; `tag`: distinguishes this boundary's point-to-point messages from other boundaries'.
  virtual std::unique_ptr<ActivationExchange> activation_exchange(const Placement& placement, size_t width,
                                                                  const MpCompression& options, int tag) const = 0;
  // `replicas`: the data-parallel group (more than one rank); the reducer keeps the pointers.
  virtual std::unique_ptr<ReplicaReducer> replica_reducer(Communicator& replicas, std::vector<Parameter*> params,
                                                          const ReducerOptions& options) const = 0;
  // A pipeline boundary between this rank and `peer` of `pipeline` (the stage before or after it);
  // `width`: the activations' width; `tag`: distinguishes the boundary's messages.
  virtual std::unique_ptr<StageLink> stage_link(Communicator& pipeline, int peer, size_t width,
                                                const MpCompression& options, int tag) const = 0;
};

}  // namespace frugal::comm
