#include "core/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/backend.h"
#include "core/optim/adagrad.h"
#include "core/optim/adam.h"
#include "core/check.h"
#include "core/step_profile.h"
#include "core/optim/sgd.h"

namespace frugal::optim {

void Options::validate() const {
  FRUGAL_CHECK(lr > 0 && std::isfinite(lr), fmt::format("optimizer: lr must be > 0, got {}", lr));
  FRUGAL_CHECK(update_threshold >= 0 && std::isfinite(update_threshold),
               fmt::format("optimizer: the update threshold must be >= 0, got {}", update_threshold));
  FRUGAL_CHECK(update_threshold == 0 || updates == SparseUpdates::lazy,
               "--update-threshold needs --sparse-updates lazy (a catch-up would replay a deferred row's step as a "
               "missed one)");
  FRUGAL_CHECK(weight_decay >= 0 && weight_decay * lr < 1,
               fmt::format("optimizer: weight decay must be >= 0 with lr * weight_decay < 1, got {} (lr {})",
                           weight_decay, lr));
  if (method == Method::adam || method == Method::rowwise_adam) {
    // (A frozen row-wise second moment would need a per-row floor: not defined.)
    FRUGAL_CHECK(method == Method::adam || freeze_second_moment == 0,
                 "row-wise Adam: freeze_second_moment is plain Adam's (use --optimizer adam)");
    FRUGAL_CHECK(beta1 >= 0 && beta1 < 1, fmt::format("Adam: beta1 must be in [0, 1), got {}", beta1));
    FRUGAL_CHECK(beta2 >= 0 && beta2 < 1, fmt::format("Adam: beta2 must be in [0, 1), got {}", beta2));
    FRUGAL_CHECK(eps > 0, fmt::format("Adam: eps must be > 0, got {}", eps));
    FRUGAL_CHECK(freeze_second_moment == 0 || updates == SparseUpdates::lazy,
                 "Adam: a frozen second moment (freeze_second_moment) needs lazy sparse updates, not catchup");
  } else if (method == Method::sgd) {
    FRUGAL_CHECK(freeze_second_moment == 0, "optimizer: freeze_second_moment is Adam's; SGD has no second moment");
    FRUGAL_CHECK(momentum >= 0 && momentum < 1, fmt::format("SGD: momentum must be in [0, 1), got {}", momentum));
  } else {
    // A zero accumulator needs eps > 0: a row's first zero gradient would divide 0 by 0.
    FRUGAL_CHECK(initial_accumulator >= 0 && std::isfinite(initial_accumulator),
                 fmt::format("Adagrad: the initial accumulator must be >= 0, got {}", initial_accumulator));
    FRUGAL_CHECK(adagrad_eps > 0, fmt::format("Adagrad: eps must be > 0, got {}", adagrad_eps));
    FRUGAL_CHECK(freeze_second_moment == 0, "optimizer: freeze_second_moment is Adam's, not Adagrad's");
  }
}

Adam::operator Options() const {
  return {.method = Method::adam, .lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
          .weight_decay = weight_decay, .updates = updates, .freeze_second_moment = freeze_second_moment};
}

Sgd::operator Options() const {
  return {.method = Method::sgd, .lr = lr, .momentum = momentum, .weight_decay = weight_decay, .updates = updates};
}

Adagrad::operator Options() const {
  return {.method = Method::adagrad, .lr = lr, .initial_accumulator = initial_accumulator, .adagrad_eps = eps,
          .weight_decay = weight_decay, .updates = updates};
}

RowwiseAdagrad::operator Options() const {
  return {.method = Method::rowwise_adagrad, .lr = lr, .initial_accumulator = initial_accumulator, .adagrad_eps = eps,
          .weight_decay = weight_decay, .updates = updates};
}

RowwiseAdam::operator Options() const {
  return {.method = Method::rowwise_adam, .lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
          .weight_decay = weight_decay, .updates = updates, .rowwise_momentum = momentum,
          .rowwise_input = rowwise_input};
}

std::string to_string(Method method) {
  switch (method) {
    case Method::adam: return "adam";
    case Method::sgd: return "sgd";
    case Method::adagrad: return "adagrad";
    case Method::rowwise_adagrad: return "rowwise-adagrad";
    case Method::rowwise_adam: return "rowwise-adam";
    case Method::automatic: return "auto";
  }
  return "unknown";
}
std::string to_string(SparseUpdates updates) { return updates == SparseUpdates::lazy ? "lazy" : "catchup"; }

Method method_from_string(const std::string& name) {
  if (name == "adam") return Method::adam;
  if (name == "sgd") return Method::sgd;
  if (name == "adagrad") return Method::adagrad;
  if (name == "rowwise-adagrad") return Method::rowwise_adagrad;
  if (name == "rowwise-adam") return Method::rowwise_adam;
  throw Error(fmt::format("unknown optimizer '{}': expected adam, sgd, adagrad, rowwise-adagrad or rowwise-adam",
                          name));
}

SparseUpdates sparse_updates_from_string(const std::string& name) {
  if (name == "lazy") return SparseUpdates::lazy;
  if (name == "catchup") return SparseUpdates::catchup;
  throw Error(fmt::format("unknown sparse update mode '{}': expected lazy or catchup", name));
}

std::unique_ptr<Optimizer> Optimizer::create(const Options& options, std::vector<Parameter*> params,
                                             const LrSchedule& schedule) {
  if (options.method == Method::sgd) return std::make_unique<SgdOptimizer>(options, std::move(params), schedule);
  if (options.method == Method::adagrad || options.method == Method::rowwise_adagrad)
    return std::make_unique<AdagradOptimizer>(options, std::move(params), schedule);
  return std::make_unique<AdamOptimizer>(options, std::move(params), schedule);  // adam, rowwise_adam
}

Optimizer::Optimizer(const Options& options, std::vector<Parameter*> params, const LrSchedule& schedule,
                     bool second_moment, float m_init)
    : options_(options), schedule_(schedule), params_(std::move(params)), state_(params_.size()) {
  options_.validate();
  schedule_.validate();
  deferred_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& w = params_[i]->value;
    if (options_.update_threshold > 0 && params_[i]->row_sparse)
      deferred_[i] = std::make_unique<DeferredRows>(w.rows(), w.cols(), options_.update_threshold);
    if (row_wise_method(options_.method) && params_[i]->row_sparse && !whole_rows(*params_[i]) &&
        (options_.rowwise_input || !params_[i]->input_rows))
      per_element_rows_.push_back(params_[i]->name);
    if (row_wise(options_, *params_[i])) {
      // One f32 per row, whatever the weights' precision: Adagrad's accumulator (m) or row-wise
      // Adam's second moment (v, beside a per-element m in the weights' precision, or none).
      if (second_moment) {
        state_[i].m = options_.rowwise_momentum ? Tensor(w.rows(), w.cols(), w.dtype()) : Tensor(0, 0, w.dtype());
        state_[i].v = Tensor(w.rows(), 1, Dtype::f32);
      } else {
        state_[i].m = Tensor(w.rows(), 1, Dtype::f32);
        if (m_init != 0.0f) state_[i].m.fill(m_init);
      }
      state_[i].row_steps.assign(w.rows(), 0);
      state_[i].m.set_name(params_[i]->name + ".m");
      state_[i].v.set_name(params_[i]->name + ".v");
      place_state(state_[i]);
      continue;
    }
    // The moments are stored in the weights' precision (bf16 halves the optimizer's bytes too).
    state_[i].m = Tensor(w.rows(), w.cols(), w.dtype());
    if (m_init != 0.0f) state_[i].m.fill(m_init);
    if (second_moment) state_[i].v = Tensor(w.rows(), w.cols(), w.dtype());
    state_[i].row_steps.assign(w.rows(), 0);
    state_[i].m.set_name(params_[i]->name + ".m");
    state_[i].v.set_name(params_[i]->name + ".v");
    place_state(state_[i]);
  }
}

bool Optimizer::row_wise_method(Method method) {
  return method == Method::rowwise_adagrad || method == Method::rowwise_adam;
}

bool Optimizer::row_wise(const Options& options, const Parameter& p) {
  // A row's statistic must see the whole row: a parameter sliced by columns over a model-parallel
  // group has part of each row here (the group would have to sum the rows' squares every step).
  return row_wise_method(options.method) && p.row_sparse && whole_rows(p) && (options.rowwise_input || !p.input_rows);
}

void Optimizer::place_state(State& s) {
  place_on(s.m, &backend());
  place_on(s.v, &backend());
}

void Optimizer::set_backend(Backend* backend) {
  for (size_t i = 0; i < state_.size(); ++i) synced(i);  // the counts the old backend holds
  backend_ = backend;
  for (State& s : state_) place_state(s);
  device_counts_.clear();
  counts_current_.clear();
}

Optimizer::State& Optimizer::synced(size_t i) const {
  auto& s = const_cast<State&>(state_.at(i));
  if (i < host_behind_.size() && host_behind_[i]) {
    copy_to_host(device_counts_.at(i), s.row_steps.data());
    host_behind_[i] = 0;
  }
  return s;
}

Tensor& Optimizer::counts_on_device(size_t i) {
  if (device_counts_.size() != state_.size()) {
    device_counts_.assign(state_.size(), Tensor(0, 0, Dtype::u32));
    counts_current_.assign(state_.size(), 0);
  }
  Tensor& t = device_counts_[i];
  if (!counts_current_[i]) {
    const std::vector<uint32_t>& steps = state_[i].row_steps;
    keep_on(t, backend());
    t.set_name(params_[i]->name + ".update_counts");
    assign_values(t, std::span<const uint32_t>(steps));
    counts_current_[i] = 1;
  }
  return t;
}

uint64_t Optimizer::move_horizon(double ratio) {
  // Far enough for every Adam setting in use (ratio 0.9 / sqrt(0.999): 197 steps; SGD momentum
  // 0.99: 2062); a ratio closer to 1 drops the moves beyond these steps.
  constexpr uint64_t kMostSteps = 2000;
  if (ratio <= 0) return 0;
  if (ratio >= 1) return kMostSteps;
  return std::min<uint64_t>(kMostSteps, static_cast<uint64_t>(std::ceil(std::log(1e-9) / std::log(ratio))));
}

void Optimizer::grow_tables(uint64_t now) {
  // One entry per step of the run so far: a catch-up may reach back to any of them.
  const double wd = options_.weight_decay;
  while (lr_table_.size() <= now) {
    const uint64_t k = lr_table_.size();
    lr_table_.push_back(lr(k - 1));
    log_keep_.push_back(log_keep_.back() + (wd > 0 ? std::log1p(-lr_table_.back() * wd) : 0.0));
  }
}

RowUpdate Optimizer::row_update(Parameter& p, State& s, std::span<const uint32_t> rows, const Tensor* grad,
                                std::span<const CatchUpPlan* const> plans, double lr) const {
  RowUpdate u;
  u.w = &p.value;
  u.m = &s.m;
  u.all_rows = every_row_;
  if (!every_row_) u.rows = rows;
  u.row_ids = rows_on_device_;
  u.rows_on_device_only = device_rows_only_;
  u.row_counts = grad != nullptr ? counts_on_device_ : nullptr;
  u.grad = grad;
  u.plans = plans;
  u.lr = static_cast<float>(lr);
  u.keep = static_cast<float>(1.0 - lr * options_.weight_decay);
  // Stochastic rounding of bf16 state: a stream per step, parameter and kind of update.
  uint64_t name_hash = 0xcbf29ce484222325ull;  // FNV-1a: the same on every platform
  for (const char c : p.name) name_hash = (name_hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  u.round_seed = (steps_ * 2 + (grad == nullptr ? 1 : 0)) ^ name_hash;
  u.row_base = p.sliced_axis == 0 ? p.offset : 0;
  u.col_base = p.sliced_axis == 1 ? p.offset : 0;
  return u;
}

double Optimizer::keep(uint64_t a, uint64_t b) const {
  return options_.weight_decay > 0 ? std::exp(log_keep_[b] - log_keep_[a]) : 1.0;
}

void Optimizer::make_plans(const std::vector<uint32_t>& last_steps, const std::vector<uint32_t>& rows, uint64_t now) {
  plan_keys_.clear();
  for (const uint32_t r : rows)
    if (last_steps[r] < now) plan_keys_.push_back(last_steps[r]);
  std::sort(plan_keys_.begin(), plan_keys_.end());
  plan_keys_.erase(std::unique(plan_keys_.begin(), plan_keys_.end()), plan_keys_.end());
  plans_.resize(plan_keys_.size());
  reserve_plans(plans_.size());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, plan_keys_.size(), 16), [&](const auto& range) {
    for (size_t k = range.begin(); k < range.end(); ++k) plans_[k] = catch_up_plan(plan_keys_[k], now, k);
  });
}

const Optimizer::CatchUpPlan* Optimizer::plan_for(uint32_t last) const {
  const auto it = std::lower_bound(plan_keys_.begin(), plan_keys_.end(), last);
  return &plans_[static_cast<size_t>(it - plan_keys_.begin())];
}

namespace {
// The work of updating `rows` rows of `cols` elements (core/step_profile.h): each element's weight
// and state tensors are read and written, its gradient (when there is one) read; the arithmetic is
// ~2 operations per element for the weight, 3 per first-moment tensor and 8 for Adam's second
// moment (square, decay, bias correction, square root, division).
void count_row_updates(const Optimizer::State& s, size_t rows, size_t cols, bool with_grad) {
  const bool has_m = !s.m.empty(), has_v = !s.v.empty();
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);
  const double arrays_rw = 1.0 + (has_m ? 1.0 : 0.0) + (has_v ? 1.0 : 0.0);
  const double bytes_per_element = static_cast<double>(dtype_bytes(s.m.dtype())) * 2.0 * arrays_rw +
                                   (with_grad ? sizeof(float) : 0.0);
  const double flops_per_element = 2.0 + (has_m ? 3.0 : 0.0) + (has_v ? 8.0 : 0.0);
  profile::count(profile::Phase::optimizer, elements * flops_per_element,
                 elements * bytes_per_element + static_cast<double>(rows) * 2.0 * sizeof(uint32_t));
}
}  // namespace

size_t Optimizer::moment_bytes() const {
  size_t bytes = 0;
  for (const State& s : state_) bytes += s.m.bytes() + s.v.bytes();
  return bytes;
}

size_t Optimizer::state_bytes() const {
  size_t bytes = 0;
  for (const State& s : state_) bytes += s.m.bytes() + s.v.bytes() + s.row_steps.size() * sizeof(uint32_t);
  for (const auto& d : deferred_)
    if (d != nullptr) bytes += d->bytes();
  return bytes;
}

uint64_t Optimizer::deferred_rows() const {
  uint64_t n = 0;
  for (const auto& d : deferred_)
    if (d != nullptr) n += d->deferred();
  return n;
}

uint64_t Optimizer::threshold_rows() const {
  uint64_t n = 0;
  for (const auto& d : deferred_)
    if (d != nullptr) n += d->listed();
  return n;
}

void Optimizer::apply_deferred() {
  if (std::all_of(deferred_.begin(), deferred_.end(), [](const auto& d) { return d == nullptr || d->empty(); })) {
    for (const auto& d : deferred_)
      if (d != nullptr) {  // the running scales start again all the same
        RowGrad none;
        d->take(none);
      }
    return;
  }
  FRUGAL_CHECK(pending_step_ == 0, "Optimizer::apply_deferred inside a step");
  // One update of the deferred rows alone at the last step's rate (lazy counts rise by one for
  // them, as for any update); the step count stays.
  pending_step_ = steps_ + 1;
  grow_tables(pending_step_);
  pending_lr_ = step_lr(std::max<uint64_t>(steps_, 1));
  applying_deferred_ = true;
  struct Reset {
    Optimizer& o;
    ~Reset() {
      o.pending_step_ = 0;
      o.applying_deferred_ = false;
    }
  } reset{*this};
  for (size_t i = 0; i < params_.size(); ++i) {
    RowGrad& grad = params_[i]->grad;
    grad.clear();
    if (deferred_[i] == nullptr) continue;
    deferred_[i]->take(grad);
    if (!grad.rows.empty()) step_parameter(i);
  }
}

void Optimizer::step() {
  begin_step();
  for (size_t i = 0; i < params_.size(); ++i) step_parameter(i);
  end_step();
}

void Optimizer::begin_step() {
  FRUGAL_CHECK(pending_step_ == 0, "Optimizer::begin_step: the previous step has not ended");
  const profile::Scope phase(profile::Phase::optimizer);
  pending_step_ = steps_ + 1;
  grow_tables(pending_step_);
  pending_lr_ = step_lr(pending_step_);
}

void Optimizer::end_step() {
  FRUGAL_CHECK(pending_step_ == steps_ + 1, "Optimizer::end_step without begin_step");
  steps_ = pending_step_;
  pending_step_ = 0;
}

size_t Optimizer::index_of(const Parameter* param) const {
  return static_cast<size_t>(std::find(params_.begin(), params_.end(), param) - params_.begin());
}

void Optimizer::step_parameter(size_t i) {
  FRUGAL_CHECK(pending_step_ == steps_ + 1 && i < params_.size(), "Optimizer::step_parameter outside a step");
  const profile::Scope phase(profile::Phase::optimizer);
  const uint64_t n = pending_step_;
  const double lr_n = pending_lr_;
  const bool catchup = options_.updates == SparseUpdates::catchup;
  Parameter& p = *params_[i];
  if (deferred_[i] != nullptr && !applying_deferred_) {
    FRUGAL_CHECK(backend().device().is_host(),
                 fmt::format("--update-threshold decides on the host, but parameter {} is updated on {}: drop the "
                             "flag on this device", p.name, backend().device().name()));
    p.grad.fetch_rows();
    deferred_[i]->filter(p.grad);
  }
  // Rows the host never had (RowGrad::rows_on_device): a lazy update runs on the device's list and
  // counts; catch-up (plans per row) or a list of another backend brings them down first.
  if (p.grad.rows_on_device && (catchup || p.grad.device_rows(&backend()) == nullptr)) p.grad.fetch_rows();
  if (p.grad.rows_on_device) return step_device_rows(i);
  State& s = synced(i);
  const size_t cols = p.value.cols();
  const auto& rows = p.grad.rows;
  FRUGAL_CHECK(p.grad.values.rows() == rows.size() && (rows.empty() || p.grad.values.cols() == cols),
               fmt::format("parameter {}: gradient shape does not match its row list", p.name));
  uint64_t most = n;
  if (!catchup) {
    most = 0;
    for (const uint32_t r : rows) most = std::max<uint64_t>(most, s.row_steps[r] + 1);
  }
  prepare(most, n);
  if (catchup) make_plans(s.row_steps, rows, n - 1);
  // A device gets a parameter whose every row changes with one count (a dense layer's, the exact
  // softmax's) without the row list: its ids and counts would cross every step, 8 bytes a row.
  // (The rows are sorted and distinct: as many as the parameter's are 0..R-1, and their counts
  // are equal after the step when they are equal before it.)
  const bool device = !backend().device().is_host();
  every_row_ = !catchup && device && !rows.empty() && rows.size() == p.value.rows() &&
               std::all_of(s.row_steps.begin(), s.row_steps.end(), [&](uint32_t c) { return c == s.row_steps[0]; });
  // Otherwise a device finds the row list where the gradient was computed when it is still the
  // gradient's, and Adam's lazy counts in its own copy, which the op raises as the host's are
  // raised below (sent first when not current: before the host's are raised).
  rows_on_device_ = device && !every_row_ ? p.grad.device_rows(&backend()) : nullptr;
  const bool counted = !catchup && !s.v.empty() && !rows.empty();
  counts_on_device_ = device && !every_row_ && counted ? &counts_on_device(i) : nullptr;
  if (every_row_ && i < counts_current_.size()) counts_current_[i] = 0;  // all_rows does not raise them
  row_counts_.resize(rows.size());
  row_plans_.resize(catchup ? rows.size() : 0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, rows.size(), 64), [&](const auto& range) {
    for (size_t j = range.begin(); j < range.end(); ++j) {
      const uint32_t r = rows[j];
      if (catchup) row_plans_[j] = s.row_steps[r] < n - 1 ? plan_for(s.row_steps[r]) : nullptr;
      const uint64_t count = catchup ? n : s.row_steps[r] + 1;
      s.row_steps[r] = static_cast<uint32_t>(count);
      row_counts_[j] = static_cast<uint32_t>(count);
    }
  });
  const std::span<const uint32_t> counts =
      every_row_ ? std::span<const uint32_t>(row_counts_).first(1) : std::span<const uint32_t>(row_counts_);
  // Rows are independent, so the result does not depend on how the backend splits them.
  {
    // The settings above are this update's alone, whether it returns or throws.
    // (Thrown: the device's counts may not have been raised as the host's were.)
    struct Reset {
      Optimizer& o;
      size_t i;
      int exceptions = std::uncaught_exceptions();
      ~Reset() {
        o.every_row_ = false;
        o.rows_on_device_ = nullptr;
        o.counts_on_device_ = nullptr;
        if (std::uncaught_exceptions() > exceptions && i < o.counts_current_.size()) o.counts_current_[i] = 0;
      }
    } reset{*this, i};
    update_rows(p, s, rows, &p.grad.values, row_plans_, counts, lr_n);
  }
  count_row_updates(s, rows.size(), cols, true);
  if (i < count_bound_.size() && !rows.empty()) count_bound_[i] = std::max(count_bound_[i], most);
}

void Optimizer::step_device_rows(size_t i) {
  Parameter& p = *params_[i];
  State& s = state_[i];
  const size_t rows = p.grad.num_rows(), cols = p.value.cols();
  FRUGAL_CHECK(p.grad.values.rows() == rows && (rows == 0 || p.grad.values.cols() == cols),
               fmt::format("parameter {}: gradient shape does not match its row list", p.name));
  // No count can pass its bound, raised by one a step: Adam's table reaches it (one row a step, as
  // when the host knows the rows).
  if (count_bound_.size() != state_.size()) {
    count_bound_.assign(state_.size(), 0);
    for (size_t k = 0; k < state_.size(); ++k)
      for (const uint32_t c : synced(k).row_steps) count_bound_[k] = std::max<uint64_t>(count_bound_[k], c);
  }
  if (rows > 0) ++count_bound_[i];
  prepare(count_bound_[i], pending_step_);
  const bool counted = !s.v.empty() && rows > 0;
  rows_on_device_ = p.grad.device_rows(&backend());
  counts_on_device_ = counted ? &counts_on_device(i) : nullptr;
  if (counted) {  // the op raises the device's counts: the host's are behind until synced
    if (host_behind_.size() != state_.size()) host_behind_.assign(state_.size(), 0);
    host_behind_[i] = 1;
  }
  device_rows_only_ = true;
  struct Reset {
    Optimizer& o;
    ~Reset() {
      o.device_rows_only_ = false;
      o.rows_on_device_ = nullptr;
      o.counts_on_device_ = nullptr;
    }
  } reset{*this};
  update_rows(p, s, {}, &p.grad.values, {}, {}, pending_lr_);
  count_row_updates(s, rows, cols, true);
}

std::vector<uint32_t> Optimizer::catch_up_param(size_t i, const std::vector<uint32_t>& rows) {
  const profile::Scope phase(profile::Phase::optimizer);
  const uint64_t now = steps_;
  grow_tables(now);
  prepare(0, now);
  Parameter& p = *params_[i];
  State& s = synced(i);
  std::vector<uint32_t> behind;
  for (const uint32_t r : rows) {
    FRUGAL_CHECK(r < s.row_steps.size(), fmt::format("parameter {}: row {} out of range", p.name, r));
    if (s.row_steps[r] < now) behind.push_back(r);
  }
  make_plans(s.row_steps, behind, now);
  row_plans_.resize(behind.size());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, behind.size(), 1024), [&](const auto& range) {
    for (size_t j = range.begin(); j < range.end(); ++j) row_plans_[j] = plan_for(s.row_steps[behind[j]]);
  });
  update_rows(p, s, behind, nullptr, row_plans_, {}, 0.0);
  count_row_updates(s, behind.size(), p.value.cols(), false);
  for (const uint32_t r : behind) s.row_steps[r] = static_cast<uint32_t>(now);
  return behind;
}

void Optimizer::catch_up() {
  if (options_.updates != SparseUpdates::catchup) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    std::vector<uint32_t> all(state_[i].row_steps.size());
    std::iota(all.begin(), all.end(), 0u);
    p.grad.rows = catch_up_param(i, all);
    p.grad.rows_on_device = false;
    p.grad.values.resize(0, p.value.cols());
  }
}

void Optimizer::catch_up_rows(const Parameter& param, const std::vector<uint32_t>& rows) {
  if (options_.updates != SparseUpdates::catchup) return;
  const auto it = std::find(params_.begin(), params_.end(), &param);
  FRUGAL_CHECK(it != params_.end(), fmt::format("parameter {} is not one this optimizer updates", param.name));
  catch_up_param(static_cast<size_t>(it - params_.begin()), rows);
}

}  // namespace frugal::optim
