// Optimizers over row-sparse gradients (core/parameter.h): a step changes only the rows that have
// a gradient. What a row that has no gradient in a step gets is the `updates` choice:
//  - lazy: nothing. Each row keeps its own update count for Adam's bias correction (SLIDE's sparse
//    Adam). Cheap, but a rarely touched row misses the momentum moves and the weight decay that a
//    dense optimizer would have applied to it, and its first updates get full-size steps.
//  - catchup: the row remembers the global step of its last update. When it is touched again after
//    missing s steps, it first gets exactly what the dense optimizer would have done to it with zero
//    gradients in those s steps (momentum decay, the moves made by the decaying momentum, weight
//    decay at each step's learning rate), then the step's update with global-step bias correction.
//    catch_up_rows() does the same ahead of time for the rows a forward pass is about to read (the
//    Trainer calls it for a batch's feature and true-label rows) and catch_up() for every row
//    (Trainer::fit_epoch, at the end of each epoch): the weights follow the dense optimizer's to
//    float rounding without touching every row in every step. How the missed steps are summed:
//    catch_up_plan() in adam.cpp, sgd.cpp and adagrad.cpp (Adagrad has no momentum: a zero
//    gradient leaves its accumulator and weight alone, so only weight decay is owed, and lazy
//    Adagrad without weight decay is dense Adagrad exactly).
// The default is lazy: on the synthetic XMC benchmark it ends 3 epochs of LSH training 4 points of
// P@1 higher and runs ~15% faster, while catch-up (= dense Adam) leads after 1 epoch (README).
// Weight decay is decoupled (AdamW, SGDW, and likewise for Adagrad): w -= lr_t * weight_decay * w
// before the step's update.
// The learning rate of step t is lr * schedule.factor(t) (core/optim/lr_schedule.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/catch_up_plan.h"
#include "core/parameter.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/deferred_rows.h"
#include "core/optim/state_layout.h"

namespace frugal {
struct RowUpdate;  // the backend op's arguments (core/backend.h, internal)
}

namespace frugal::optim {

// rowwise_adagrad: Adagrad with one accumulator per row (the mean of the row's squared gradient)
// for the row-sparse parameters (Parameter::row_sparse: the sparse input layer's and a sampled
// output layer's weights), FBGEMM's and TorchRec's default for embedding tables; the other
// parameters (dense layers, biases) keep per-element Adagrad. A row's state is 4 bytes instead of
// 4 per element, and its update reads and writes the weights alone.
// rowwise_adam: Adam whose second moment is one f32 per row of a row-sparse parameter (the
// moving average of the row's mean squared gradient) and whose first moment is per element
// (Options::rowwise_momentum) or absent (then the step is the gradient over the row's root mean
// square: RMSProp per row with Adam's bias correction). The other parameters keep Adam.
// automatic: what the trainer picks for the model it trains (TrainerOptions' default: row-wise Adam
// for a sampled output layer, Adam otherwise, as `frugal train --optimizer auto`); an optimizer is
// never made with it.
enum class Method { adam, sgd, adagrad, rowwise_adagrad, rowwise_adam, automatic };
enum class SparseUpdates { lazy, catchup };

// Every optimizer setting. Shorthands below: .optimizer = optim::Adam{.lr = 1e-3f},
// optim::Sgd{.lr = 0.2f}, optim::Adagrad{.lr = 0.01f} or optim::RowwiseAdagrad{}; the plain form .optimizer = {.lr = 1e-3f}
// is Adam.
struct Options {
  Method method = Method::adam;
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // Adam
  float momentum = 0.9f;                             // SGD (heavy ball, no dampening; 0: plain SGD)
  // Adagrad: the accumulator's starting value and its own eps, PyTorch's 0 and 1e-10 (Adam's 1e-8
  // is a default for another denominator). From 0 a weight's first step is lr * sign(g), as Adam's
  // is. TensorFlow's 0.1 swamps the sum of squares of gradients of a mean loss (1e-3 and less
  // here): Adagrad then is SGD at lr / sqrt(0.1), and at lr 0.01 it does not learn (README).
  float initial_accumulator = 0.0f, adagrad_eps = 1e-10f;
  float weight_decay = 0.0f;                         // decoupled: w -= lr * weight_decay * w per step
  SparseUpdates updates = SparseUpdates::lazy;
  // Adam: each row's second moment freezes after the row's first `freeze_second_moment` updates
  // (0: never), as 1-bit Adam freezes its variance after a warm-up. Later steps are then linear in
  // the gradient, so a burst that DCT-DP's error feedback releases moves the weights as far as the
  // steps it stands for instead of being normalized to one step's size. Lazy updates only (a
  // catch-up would need v's decay).
  uint32_t freeze_second_moment = 0;
  // rowwise_adam: whether the row-sparse parameters keep Adam's per-element first moment (on: the
  // weights' size again in state; off: the state is the per-row second moment alone).
  bool rowwise_momentum = true;
  // Row-wise optimizers: whether input tables (Parameter::input_rows: the sparse input layer,
  // embedding tables) keep row-wise state too (--rowwise-layers all), or only the output layer's
  // sampled label rows do and the input tables keep the per-element state of Adagrad or Adam
  // (--rowwise-layers output, what --optimizer auto picks: measured better, docs/optimizers.md).
  bool rowwise_input = true;
  // --update-threshold (core/optim/deferred_rows.h): a row-sparse parameter's row whose step
  // gradient's RMS is below this fraction of the row's running gradient RMS is not updated; its
  // gradient waits in a residual until the sum matters or the epoch ends (apply_deferred). 0: off
  // (every step bit for bit as without it). Lazy updates only, on a host backend.
  float update_threshold = 0.0f;
  void validate() const;
  bool operator==(const Options&) const = default;
};

struct Adam {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  SparseUpdates updates = SparseUpdates::lazy;
  uint32_t freeze_second_moment = 0;  // Options::freeze_second_moment
  operator Options() const;  // NOLINT: implicit on purpose (TrainerOptions::optimizer = Adam{...})
  void validate() const { Options(*this).validate(); }
};

struct Sgd {
  float lr = 0.2f, momentum = 0.9f, weight_decay = 0.0f;
  SparseUpdates updates = SparseUpdates::lazy;
  operator Options() const;  // NOLINT: implicit on purpose
  void validate() const { Options(*this).validate(); }
};

// PyTorch's defaults; eps is Options::adagrad_eps.
struct Adagrad {
  float lr = 0.01f, initial_accumulator = 0.0f, eps = 1e-10f, weight_decay = 0.0f;
  SparseUpdates updates = SparseUpdates::lazy;
  operator Options() const;  // NOLINT: implicit on purpose
  void validate() const { Options(*this).validate(); }
};

// Row-wise Adagrad (Method::rowwise_adagrad). lr 0.1: measured best of 0.01, 0.03, 0.1 and 0.3 on
// the synthetic 100k-label set, a long-tail set and GCIDE (docs/optimizers.md).
struct RowwiseAdagrad {
  float lr = 0.1f, initial_accumulator = 0.0f, eps = 1e-10f, weight_decay = 0.0f;
  SparseUpdates updates = SparseUpdates::lazy;
  operator Options() const;  // NOLINT: implicit on purpose
  void validate() const { Options(*this).validate(); }
};

// Row-wise Adam (Method::rowwise_adam): Adam's betas and eps, the first moment per element by
// default. lr 1e-2: measured best of 1e-3, 3e-3, 1e-2 and 3e-2 on the synthetic 100k-label set and a
// long-tail set (3e-2 diverges on both; docs/optimizers.md).
struct RowwiseAdam {
  float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  bool momentum = true;  // Options::rowwise_momentum
  SparseUpdates updates = SparseUpdates::lazy;
  // Options::rowwise_input: row-wise state on the sparse input layer too (true), or on the output
  // layer's label rows only (false: what `frugal train --optimizer auto` uses).
  bool rowwise_input = true;
  operator Options() const;  // NOLINT: implicit on purpose
  void validate() const { Options(*this).validate(); }
};

std::string to_string(Method method);
std::string to_string(SparseUpdates updates);
Method method_from_string(const std::string& name);
SparseUpdates sparse_updates_from_string(const std::string& name);

class Optimizer {
 public:
  // Per-parameter state, in the order of the parameter list (checkpoints read and write it).
  struct State {
    // Adam: first and second moments; SGD: m is the momentum buffer; Adagrad: m is the sum of
    // squared gradients (from initial_accumulator). v is empty but for Adam. Row-wise state of a
    // row-sparse parameter (row_wise()): Adagrad's m, or row-wise Adam's v, is one f32 column;
    // row-wise Adam's m is per element, or empty without momentum.
    Tensor m, v;
    // lazy: updates the row has had (its bias-correction count); catchup: global step of its last
    // update (0: never). Either way a checkpoint reslices it row by row.
    std::vector<uint32_t> row_steps;
  };

  // An AdamOptimizer, SgdOptimizer or AdagradOptimizer, as options.method says.
  static std::unique_ptr<Optimizer> create(const Options& options, std::vector<Parameter*> params,
                                           const LrSchedule& schedule = {});
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies every parameter's row gradient as step steps() + 1, then leaves the gradients as they were.
  void step();
  // step() in parts, for a trainer that moves some parameters while an exchange is in flight:
  // begin_step(), then step_parameter(i) once for every parameter index in any order, then
  // end_step(). Each parameter's update is step()'s, so the result is the same bits.
  void begin_step();
  void step_parameter(size_t i);
  void end_step();
  // The index of `param` in the list the optimizer was made with; size() when it is not there.
  size_t index_of(const Parameter* param) const;
  // catchup: gives every row the steps it missed up to steps(), so the weights are the dense
  // optimizer's. Each parameter's grad.rows then lists the rows it changed (grad.values is left
  // empty): layers learn from after_update() which rows moved. lazy: does nothing.
  void catch_up();
  // catchup: the same for the listed rows of `param` only (sorted, unique), e.g. those a forward
  // pass is about to read. lazy: does nothing.
  void catch_up_rows(const Parameter& param, const std::vector<uint32_t>& rows);

  // --update-threshold: applies every deferred row's residual in one update at the last step's
  // learning rate (not a training step: steps() stays), leaving each parameter's grad.rows listing
  // the rows it moved (empty where none), and starts the rows' running scales again. The Trainer
  // calls it at the end of each epoch, before a checkpoint is written, so no residual is ever
  // left out of the weights a checkpoint holds. Does nothing without deferred rows.
  void apply_deferred();
  // Rows deferred and rows listed for the deferral's rule since the optimizer was made (0 and 0 without it).
  uint64_t deferred_rows() const;
  uint64_t threshold_rows() const;

  // Whether parameter p keeps one state value per row under these options: rowwise_adagrad or
  // rowwise_adam, a row-sparse parameter, and whole rows here. A row-sparse parameter sliced by
  // columns over a model-parallel group (the sparse input layer on M > 1 model ranks: each rank has
  // part of every row) is updated by per-element Adagrad or Adam (both moments, whatever
  // rowwise_momentum says) instead: row_wise_fallbacks() names those, for the run's log.
  static bool row_wise(const Options& options, const Parameter& p);
  static bool row_wise_method(Method method);
  // Whether this rank holds whole rows of p (not a column slice of a model-parallel group).
  static bool whole_rows(const Parameter& p) { return p.sliced_axis != 1 || p.value.cols() == p.full_cols; }
  const std::vector<std::string>& row_wise_fallbacks() const { return per_element_rows_; }

  // Bytes of optimizer state: every parameter's moments (or momentum, or accumulator) and its rows'
  // step counts.
  size_t state_bytes() const;
  // Bytes of the moments alone (every parameter's m and v), read without bringing them to the host.
  size_t moment_bytes() const;
  uint64_t steps() const { return steps_; }
  void set_steps(uint64_t steps) { steps_ = steps; }
  // The learning rate of 0-based step `step` (base rate times the schedule's factor).
  double lr(uint64_t step) const { return options_.lr * schedule_.factor(step); }
  const Options& options() const { return options_; }
  const LrSchedule& schedule() const { return schedule_; }
  size_t size() const { return state_.size(); }
  // Parameter i's state, where the backend keeps it (host code reads a device's moments with
  // copy_to_host / to_host, core/tensor.h). The writable form may change row_steps (a checkpoint
  // load): the device's copy of them is sent again before it is used next.
  // (A device's lazy counts that ran ahead of the host's, steps over rows the host never had, come
  // down first.)
  State& state(size_t i) {
    State& s = synced(i);
    if (i < counts_current_.size()) counts_current_[i] = 0;
    count_bound_.clear();  // the counts may change: their bound is found again
    return s;
  }
  const State& state(size_t i) const { return synced(i); }
  // The Backend the row updates run on (core/backend.h): the one set here, else host_backend().
  Backend& backend() const { return backend_ != nullptr ? *backend_ : host_backend(); }
  // Another backend takes over: the state moves into its memory (place_on, core/tensor.h).
  void set_backend(Backend* backend);

 protected:
  // What the missed steps (last, now] do to a row, element-wise (core/backend.h): SGD: w = decay *
  // w - move * m; Adam: w = decay * w - m * sum_j terms[2j] / (terms[2j + 1] * sqrt(v) + eps) over
  // terms_count steps. Then m *= m_decay, v *= v_decay. Adagrad: w = decay * w only.
  using CatchUpPlan = frugal::CatchUpPlan;

  // m starts at m_init everywhere (0 but for Adagrad's accumulator); v exists with second_moment.
  Optimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule, bool second_moment,
            float m_init = 0.0f);
  // Missed steps whose momentum moves are summed: beyond it the moves are below 1e-9 of the first
  // (ratio: the factor by which consecutive moves shrink; the decay still covers every step).
  static uint64_t move_horizon(double ratio);
  // prod over steps k in (a, b] of (1 - lr_k * weight_decay) (1-based steps; 1 without decay).
  double keep(uint64_t a, uint64_t b) const;
  // 1-based step k's learning rate, from a table (valid for k <= the largest step prepared).
  double step_lr(uint64_t k) const { return lr_table_[k]; }

  // Called before the rows of a step (or a catch-up) are processed in parallel: grow the tables
  // those rows read, up to bias-correction count `max_count` and step `now`.
  virtual void prepare(uint64_t max_count, uint64_t now) = 0;
  // Room for `plans` plans (called before they are made in parallel, each into its own slot).
  virtual void reserve_plans(size_t /*plans*/) {}
  virtual CatchUpPlan catch_up_plan(uint64_t last, uint64_t now, size_t slot) = 0;
  // The listed rows of parameter p (one Backend op for them all): row j first gets its catch-up
  // (when plans is not empty and plans[j] is not null), then the step's update with gradient
  // grad->row(j) (when grad is not null) at learning rate `lr`, bias-correction count counts[j] (Adam).
  // What every optimizer's update_rows hands its Backend op: the weights, the first state tensor
  // (m), the rows with their gradient and plans, lr, and keep = 1 - lr * weight_decay (w * 1.0f is
  // exact: without decay the update is bitwise what it was before decay existed). The caller adds
  // its own fields.
  RowUpdate row_update(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                       std::span<const CatchUpPlan* const> plans, double lr) const;
  virtual void update_rows(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                           std::span<const CatchUpPlan* const> plans, std::span<const uint32_t> counts,
                           double lr) = 0;

 private:
  // The moments into the memory of the backend the updates run on.
  void place_state(State& s);
  // Set by step_parameter around update_rows when the update covers every row with one count
  // (row_update then asks for RowUpdate::all_rows).
  bool every_row_ = false;
  // Set by step_parameter around update_rows on a device backend: the gradient's row list already
  // on the device (RowGrad::device_rows) and Adam's update counts kept there (row_update passes
  // them as RowUpdate::row_ids / row_counts).
  const Tensor* rows_on_device_ = nullptr;
  Tensor* counts_on_device_ = nullptr;
  // Parameter i's lazy update counts (row_steps) in the backend's memory, sent when they are not
  // current (first use, a checkpoint load, a step that did not raise them on the device).
  Tensor& counts_on_device(size_t i);
  std::vector<Tensor> device_counts_;
  std::vector<uint8_t> counts_current_;
  // Parameter i's host counts are behind the device's (steps over rows the host never had,
  // RowGrad::rows_on_device); synced() brings them down. count_bound_[i]: no count of parameter i
  // exceeds it (Adam's table must reach every count the device may read).
  mutable std::vector<uint8_t> host_behind_;
  std::vector<uint64_t> count_bound_;
  State& synced(size_t i) const;
  // A lazy step over rows on the device only (their list and Adam's counts there).
  void step_device_rows(size_t i);
  bool device_rows_only_ = false;  // set by step_device_rows around its update (row_update reads it)
  void grow_tables(uint64_t now);
  // Brings parameter i's listed rows that are behind up to steps(); returns those rows.
  std::vector<uint32_t> catch_up_param(size_t i, const std::vector<uint32_t>& rows);
  // Plans for the distinct last steps (< now) of `rows`, sorted by last step.
  void make_plans(const std::vector<uint32_t>& last_steps, const std::vector<uint32_t>& rows, uint64_t now);
  const CatchUpPlan* plan_for(uint32_t last) const;

  Options options_;
  LrSchedule schedule_;
  std::vector<Parameter*> params_;
  uint64_t pending_step_ = 0;  // begin_step()'s step, 0 outside one
  double pending_lr_ = 0.0;
  std::vector<State> state_;
  uint64_t steps_ = 0;
  std::vector<double> lr_table_{0.0}, log_keep_{0.0};  // by 1-based step: lr, sum of log(1 - lr * wd)
  std::vector<uint32_t> plan_keys_;
  std::vector<CatchUpPlan> plans_;
  std::vector<const CatchUpPlan*> row_plans_;  // per row of the current update: its plan or null
  std::vector<uint32_t> row_counts_;            // per row of the current update: its update count
  Backend* backend_ = nullptr;
  // --update-threshold: per parameter, its deferred rows (null: not row-sparse, or the threshold 0).
  std::vector<std::unique_ptr<DeferredRows>> deferred_;
  bool applying_deferred_ = false;  // set by apply_deferred around its updates (no rule applied)
  std::vector<std::string> per_element_rows_;  // row-sparse parameters a row-wise method keeps per element
};

}  // namespace frugal::optim
