#include "train/dlrm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/binary_metrics.h"
#include "core/check.h"
#include "core/placement.h"
#include "core/rng.h"
#include "comm/exchange_factory.h"
#include "core/progress.h"
#include "train/ctr_batches.h"
#include "train/divergence.h"
#include "train/epoch_run.h"
#include "train/gradient_clipping.h"

namespace frugal::train {

DlrmTrainer::DlrmTrainer(layers::DlrmNetwork& network, const layers::IdMap& ids, const DlrmTrainOptions& options)
    : network_(network), ids_(ids), options_(options),
      optimizer_(optim::Optimizer::create(options.optimizer, network.parameters(), options.lr_schedule)) {
  FRUGAL_CHECK(options_.batch > 0, "DLRM: --batch must be > 0");
  FRUGAL_CHECK(options_.clip_norm >= 0.0f && std::isfinite(options_.clip_norm),
               fmt::format("DLRM: --clip-norm must be >= 0 (0: off), got {}", options_.clip_norm));
  FRUGAL_CHECK(ids_.num_fields() == network_.options().fields.size() && ids_.lookups() == network_.options().lookups,
               fmt::format("DLRM: the id map has {} fields x {} lookups, the network {} x {}", ids_.num_fields(),
                           ids_.lookups(), network_.options().fields.size(), network_.options().lookups));
  comm::Communicator* group = network_.options().group;
  if (comm::is_active(group)) {
    const comm::ExchangeFactory& exchanges = options_.exchanges != nullptr ? *options_.exchanges : comm::comm_exchanges();
    dense_reducer_ = exchanges.replica_reducer(
        *group, network_.replicated_dense_parameters(),
        options_.dp ? comm::ReducerOptions{.mode = comm::ReduceMode::thresholded, .dp = *options_.dp}
                    : comm::ReducerOptions{.mode = comm::ReduceMode::dense});
    if (const std::vector<Parameter*> tables = network_.replicated_table_parameters(); !tables.empty())
      table_reducer_ = exchanges.replica_reducer(
          *group, tables, comm::ReducerOptions{.mode = comm::ReduceMode::dense, .list_summed_rows = true});
  }
}

double DlrmTrainer::group_sum(double value) const {
  comm::Communicator* g = network_.options().group;
  if (!comm::is_active(g)) return value;
  std::vector<std::vector<std::byte>> all;
  g->all_gather_bytes(std::as_bytes(std::span<const double>(&value, 1)), all).wait();
  double sum = 0;
  for (const auto& bytes : all) {
    FRUGAL_CHECK(bytes.size() == sizeof(double), "DLRM: a rank sent a loss of the wrong size");
    double v = 0;
    std::memcpy(&v, bytes.data(), sizeof(double));
    sum += v;
  }
  return sum;
}

FitResult DlrmTrainer::fit_epoch(const layers::CtrView& train, uint64_t seed, size_t max_steps, const std::string& label,
                                 uint64_t epoch_number, size_t skip_steps, bool end_epoch) {
  train.validate();
  CtrBatches batches(train, options_.batch, seed, network_.options().group);
  const FitOptions fit{.batch = options_.batch, .seed = seed, .progress = options_.progress, .label = label,
                       .max_steps = max_steps, .skip_steps = skip_steps, .end_epoch = end_epoch};
  const size_t skipped = std::min(train.size, skip_steps * options_.batch);  // a part: what is left
  const size_t total = max_steps > 0 ? std::min(train.size - skipped, max_steps * options_.batch) : train.size - skipped;
  return fit_with(batches, fit, total, epoch_number);
}

FitResult DlrmTrainer::fit_stream(data::CtrStream& stream, size_t max_steps, const std::string& label,
                                  uint64_t epoch_number, bool end_epoch) {
  CtrStreamBatches batches(stream);
  const FitOptions fit{.batch = options_.batch, .progress = options_.progress, .label = label, .max_steps = max_steps,
                       .end_epoch = end_epoch};
  const size_t total = max_steps > 0 ? std::min(stream.global_samples(), max_steps * options_.batch)
                                     : stream.global_samples();
  return fit_with(batches, fit, total, epoch_number);
}

template <class Loader>
FitResult DlrmTrainer::fit_with(Loader& batches, const FitOptions& fit, size_t total, uint64_t epoch_number) {
  comm::Communicator* group = network_.options().group;
  const bool end_epoch = fit.end_epoch;
  // A rank's step loss is its part's: the group stops at the epoch's end, on the summed loss.
  const DivergencePolicy divergence{.on = OnDivergence::stop, .step_loss_is_global = false,
                                    .epoch = epoch_number, .lr = optimizer_->lr(optimizer_->steps())};
  FitResult result;
  ClipTally clipping;
  size_t group_samples = 0;
  Progress progress(fit.label, total, options_.progress);
  const auto t0 = std::chrono::steady_clock::now();
  const double loss_sum = epoch::run_steps(
      batches, fit, result, divergence,
      [&](const layers::CtrView& batch, size_t global) {
        ids_.map(batch, rows_);
        const double loss = network_.forward_backward(batch, rows_, /*train=*/true);
        if (table_reducer_) table_reducer_->reduce();
        if (dense_reducer_) dense_reducer_->reduce();
        if (options_.clip_norm > 0.0f) {
          // After forward_backward every rank holds the group's gradient (its table slice, the summed
          // MLPs): the norm is the whole model's, the same on every rank.
          const double norm = clip_gradient_norm(network_.parameters(), options_.clip_norm, group);
          if (!std::isfinite(norm))
            throw_divergence(divergence_where(epoch_number, result.steps + 1), "gradient norm", norm,
                             optimizer_->lr(optimizer_->steps()));
          clipping.add(norm, options_.clip_norm);
        }
        optimizer_->step();
        group_samples += global;
        return loss;
      },
      [&](double loss_so_far) {
        progress.update(group_samples, result.samples > 0 ? loss_so_far / static_cast<double>(result.samples) : 0.0);
      });
  if (end_epoch) optimizer_->apply_deferred();  // --update-threshold: no residual outlives the epoch
  epoch::require_finite_weights(network_.parameters(), {group}, divergence);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.grad_norm = clipping.mean_norm();
  result.clipped_steps = clipping.clipped;
  // The group's loss over the group's samples (every rank walked the same global batches), summed
  // exactly in rank order: the same bits on every rank, which stop together here.
  const double group_loss = group_sum(loss_sum);
  result.samples = result.group_samples = group_samples;
  if (!std::isfinite(group_loss))
    throw_divergence(divergence_where(epoch_number, result.diverged_step), "training loss", group_loss,
                     optimizer_->lr(optimizer_->steps()));
  result.loss_sum = group_loss;
  result.loss = result.samples > 0 ? group_loss / static_cast<double>(result.samples) : 0.0;
  result.samples_per_s = result.seconds > 0 ? static_cast<double>(result.samples) / result.seconds : 0.0;
  progress.finish(fmt::format("done: {} samples in {:.2f} s ({:.0f} samples/s), loss {:.4f}", result.samples,
                              result.seconds, result.samples_per_s, result.loss));
  return result;
}

void DlrmTrainer::predict(const layers::CtrView& data, std::vector<float>& probabilities, size_t batch) {
  data.validate();
  FRUGAL_CHECK(batch > 0, "DLRM: the evaluation batch must be > 0");
  probabilities.resize(data.size);
  comm::Communicator* g = network_.options().group;
  std::vector<float> part;
  for (size_t begin = 0; begin < data.size; begin += batch) {
    const size_t global = std::min(batch, data.size - begin);
    const auto [first, last] = CtrBatches::part(global, g);
    const layers::CtrView b = data.slice(begin + first, begin + last);
    ids_.map(b, rows_);
    network_.predict(b, rows_, part);
    std::span<float> out(probabilities.data() + begin, global);
    if (!comm::is_active(g)) {
      std::copy(part.begin(), part.end(), out.begin());
      continue;
    }
    // Every rank gets the whole batch's probabilities, in sample order.
    const std::vector<size_t> bounds = slice_bounds(global, static_cast<size_t>(g->size()));
    std::vector<size_t> counts(bounds.size() - 1);
    for (size_t r = 0; r < counts.size(); ++r) counts[r] = bounds[r + 1] - bounds[r];
    g->all_gatherv(part, out, counts).wait();
  }
}

ClickMetrics DlrmTrainer::evaluate(const layers::CtrView& test, size_t batch) {
  std::vector<float> probabilities;
  predict(test, probabilities, batch);
  ClickMetrics m;
  m.samples = test.size;
  for (float y : test.labels) m.clicks += y > 0.5f ? 1 : 0;
  m.auc = auc(probabilities, test.labels);
  m.logloss = logloss(probabilities, test.labels);
  return m;
}

}  // namespace frugal::train
