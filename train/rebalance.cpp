#include "train/rebalance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "core/check.h"
#include "core/communicator.h"
#include "train/checkpoint.h"

namespace frugal::train {

namespace {

// Water-filling over the ranks in `members`: they share the model by throughput, a rank over its
// cap is fixed at the cap first, then a rank under the minimum at the minimum; repeat. The others
// get 0. Returns false when the members' caps cannot hold the model.
bool water_fill(const std::vector<bool>& members, const std::vector<double>& cap, double min_share,
                RebalancePlan& plan) {
  const size_t n = members.size();
  double cap_sum = 0;
  for (size_t r = 0; r < n; ++r)
    if (members[r]) cap_sum += cap[r];
  if (cap_sum < 1.0 - 1e-12) return false;
  plan.weights.assign(n, 0.0);
  plan.raised.assign(n, false);
  plan.capped.assign(n, false);
  std::vector<bool> fixed(n, false);
  for (size_t r = 0; r < n; ++r) fixed[r] = !members[r];
  for (size_t round = 0; round <= 2 * n; ++round) {
    double left = 1.0, free_throughput = 0;
    for (size_t r = 0; r < n; ++r) {
      if (fixed[r]) left -= plan.weights[r];
      else free_throughput += plan.throughput[r];
    }
    if (free_throughput <= 0) break;
    for (size_t r = 0; r < n; ++r)
      if (!fixed[r]) plan.weights[r] = left * plan.throughput[r] / free_throughput;
    bool changed = false;
    for (size_t r = 0; r < n; ++r)
      if (!fixed[r] && plan.weights[r] > cap[r]) {
        plan.weights[r] = cap[r];
        fixed[r] = plan.capped[r] = changed = true;
      }
    if (changed) continue;
    for (size_t r = 0; r < n; ++r)
      if (!fixed[r] && plan.weights[r] < min_share) {
        plan.weights[r] = min_share;
        fixed[r] = plan.raised[r] = changed = true;
      }
    if (!changed) break;
  }
  return true;
}

// The slowest member's compute seconds per step at the plan's weights.
double predicted_step(const RebalancePlan& plan) {
  double step = 0;
  for (size_t r = 0; r < plan.weights.size(); ++r)
    if (plan.weights[r] > 0) step = std::max(step, plan.weights[r] / plan.throughput[r]);
  return step;
}

}  // namespace

RebalancePlan throughput_weights(std::span<const double> step_seconds, std::span<const double> current_weights,
                                 const RebalanceOptions& options) {
  const size_t n = step_seconds.size();
  FRUGAL_CHECK(n >= 1, "throughput_weights: no step times");
  FRUGAL_CHECK(current_weights.empty() || current_weights.size() == n,
               fmt::format("throughput_weights: {} current weights for {} ranks", current_weights.size(), n));
  FRUGAL_CHECK(options.max_share.empty() || options.max_share.size() == n,
               fmt::format("RebalanceOptions::max_share has {} entries for {} ranks", options.max_share.size(), n));
  FRUGAL_CHECK(options.exchange_seconds >= 0 && std::isfinite(options.exchange_seconds),
               fmt::format("RebalanceOptions::exchange_seconds {} is not a time", options.exchange_seconds));
  FRUGAL_CHECK(options.min_share >= 0 && options.min_share * static_cast<double>(n) <= 1.0,
               fmt::format("RebalanceOptions::min_share {} does not fit {} ranks", options.min_share, n));
  double current_sum = 0;
  for (size_t r = 0; r < n; ++r) {
    const double w = current_weights.empty() ? 1.0 : current_weights[r];
    FRUGAL_CHECK(w >= 0 && std::isfinite(w), "throughput_weights: current weights must be >= 0 and finite");
    // A rank holding nothing may have measured (next to) no compute at all.
    FRUGAL_CHECK(std::isfinite(step_seconds[r]) && (step_seconds[r] > 0 || (w == 0 && step_seconds[r] == 0)),
                 fmt::format("rank {}'s step time {} s is not a positive number", r, step_seconds[r]));
    current_sum += w;
  }
  FRUGAL_CHECK(current_sum > 0, "throughput_weights: every current weight is 0");
  RebalancePlan plan;
  plan.throughput.resize(n);
  for (size_t r = 0; r < n; ++r) {
    const double w = current_weights.empty() ? 1.0 : current_weights[r];
    // A rank that held nothing was not measured on any work: it stays out.
    plan.throughput[r] = w > 0 ? w / current_sum / step_seconds[r] : 0.0;
  }
  std::vector<double> cap(n, 1.0);
  for (size_t r = 0; r < n; ++r) {
    if (!options.max_share.empty()) cap[r] = options.max_share[r];
    FRUGAL_CHECK(cap[r] >= options.min_share, fmt::format("RebalanceOptions::max_share of rank {} ({}) is below "
                                                          "min_share ({})", r, cap[r], options.min_share));
  }
  // Candidate groups: the k fastest ranks, k = 1 .. n (ties: the lower rank first; with keep_first,
  // rank 0 and the k - 1 fastest others). The group whose slowest member finishes first wins; on a
  // tie, the larger group. A rank outside it gets no share: given its minimum share, a rank far
  // slower than the others would hold every step up.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  const bool first_fixed = options.keep_first && plan.throughput[0] > 0;
  std::stable_sort(order.begin() + (first_fixed ? 1 : 0), order.end(),
                   [&](size_t a, size_t b) { return plan.throughput[a] > plan.throughput[b]; });
  const auto holders = static_cast<size_t>(
      std::count_if(plan.throughput.begin(), plan.throughput.end(), [](double t) { return t > 0; }));
  std::vector<bool> members(n, false);
  std::optional<RebalancePlan> best;
  double best_step = 0, cap_sum = 0;
  for (size_t k = 1; k <= holders; ++k) {
    members[order[k - 1]] = true;
    cap_sum += cap[order[k - 1]];
    if (!options.leave_out_slow && k < holders) continue;
    RebalancePlan candidate = plan;
    if (!water_fill(members, cap, options.min_share, candidate)) continue;
    // The exchanges: what the whole group measured, for each member beyond the first (none alone).
    const double exchange = n > 1 ? options.exchange_seconds * static_cast<double>(k - 1) / static_cast<double>(n - 1)
                                  : 0.0;
    const double step = predicted_step(candidate) + exchange;
    if (!best || step <= best_step) {
      best = std::move(candidate);
      best_step = step;
    }
  }
  FRUGAL_CHECK(best.has_value(), fmt::format("the ranks' memory caps hold {:.3f} of the model, less than all of it",
                                             cap_sum));
  plan = std::move(*best);
  plan.left_out.resize(n);
  for (size_t r = 0; r < n; ++r) plan.left_out[r] = plan.weights[r] == 0.0;
  plan.predicted_step_seconds = best_step;
  return plan;
}

namespace {

// Every model rank's value, indexed by its rank in `model`; over the replicas of `data`, `across`.
std::vector<double> gather_per_model_rank(double mine, comm::Communicator* model, comm::Communicator* data,
                                          comm::ReduceOp across) {
  const bool sliced = comm::is_active(model);
  const size_t n = sliced ? static_cast<size_t>(model->size()) : 1;
  std::vector<float> values(n, 0.0f);
  values[sliced ? static_cast<size_t>(model->rank()) : 0] = static_cast<float>(mine);
  // One non-zero per position: the sum is exact, every rank gets the same bits.
  if (sliced) model->all_reduce(values, comm::ReduceOp::sum).wait();
  if (comm::is_active(data)) data->all_reduce(values, across).wait();
  return {values.begin(), values.end()};
}

}  // namespace

std::vector<double> gather_step_seconds(double mine, comm::Communicator* model, comm::Communicator* data) {
  return gather_per_model_rank(mine, model, data, comm::ReduceOp::max);
}

double gather_exchange_seconds(double mine, comm::Communicator* model, comm::Communicator* data) {
  const std::vector<double> waits = gather_per_model_rank(std::max(0.0, mine), model, data, comm::ReduceOp::max);
  return *std::min_element(waits.begin(), waits.end());
}

double memory_cap(double share, double state_bytes, std::optional<double> available_bytes, double headroom) {
  FRUGAL_CHECK(share >= 0 && share <= 1.0 + 1e-9, fmt::format("memory_cap: share {} is not in [0, 1]", share));
  FRUGAL_CHECK(headroom > 0 && headroom <= 1, fmt::format("memory_cap: headroom {} is not in (0, 1]", headroom));
  // A rank holding nothing (share 0) has no state to scale from: no cap.
  if (!available_bytes || state_bytes <= 0 || share == 0) return 1.0;
  return std::min(1.0, share * (state_bytes + headroom * std::max(0.0, *available_bytes)) / state_bytes);
}

std::vector<double> gather_memory_caps(double mine, comm::Communicator* model, comm::Communicator* data) {
  return gather_per_model_rank(mine, model, data, comm::ReduceOp::min);
}

double model_state_bytes(const Model& model, const Trainer& trainer) {
  double bytes = 0;
  for (const Parameter* p : model.parameters()) bytes += static_cast<double>(p->value.bytes());
  // The sizes only: state(i) would bring a device backend's moments to the host.
  return bytes + static_cast<double>(trainer.optimizer().moment_bytes());
}

void reslice(const std::string& scratch_dir, Model& model, std::optional<Trainer>& trainer,
             const std::function<void(Model&, const std::vector<double>&)>& build, const std::vector<double>& weights,
             const Regroup* regroup) {
  FRUGAL_CHECK(trainer.has_value() && &trainer->model() == &model, "reslice: the trainer must train this model");
  TrainerOptions options = trainer->options();
  comm::Communicator* mp = comm::is_active(options.parallel.model) ? options.parallel.model : nullptr;
  comm::Communicator* dp = comm::is_active(options.parallel.data) ? options.parallel.data : nullptr;
  trainer->apply_deferred();  // a residual would not survive the optimizer's rebuild
  save_checkpoint(scratch_dir, model, *trainer);
  // The manifest is written by replica 0's slice 0 last: replicas wait for their replica 0, then
  // the model group for its slice 0 (which has waited for replica 0's slice 0).
  if (dp != nullptr) dp->barrier().wait();
  if (mp != nullptr) mp->barrier().wait();
  trainer.reset();
  model = Model();
  if (regroup != nullptr && regroup->leave) return;
  if (regroup != nullptr) options.parallel.model = regroup->model;
  build(model, weights);
  trainer.emplace(model, options);
  load_checkpoint(scratch_dir, model, *trainer);
}

}  // namespace frugal::train
