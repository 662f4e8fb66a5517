#include "train/epoch_run.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/parameter.h"
#include "core/tensor.h"

namespace frugal::train::epoch {

data::BatchLoader loader(const data::Dataset& data, const FitOptions& options, const comm::Communicator* replicas) {
  const bool sharded = comm::is_active(replicas);
  return data::BatchLoader(data, {.batch = options.batch, .shuffle = options.shuffle, .seed = options.seed,
                                  .shard = sharded ? static_cast<size_t>(replicas->rank()) : 0,
                                  .num_shards = sharded ? static_cast<size_t>(replicas->size()) : 1});
}

void add_traffic(FitResult& result, const comm::ByteCount& mp, const comm::ByteCount& dp) {
  result.mp_bytes_sent = mp.sent;
  result.dp_bytes_sent = dp.sent;
  result.bytes_sent = mp.sent + dp.sent;
  result.bytes_received = mp.received + dp.received;
}

void require_finite_weights(const std::vector<Parameter*>& params, std::initializer_list<comm::Communicator*> groups,
                            const DivergencePolicy& divergence) {
  // Each parameter's sum of squares where it lives (one double crosses from a device, not the
  // weights): NaN or infinity there means some weight is, and a sum beyond kDivergedWeight^2 means
  // the parameter's norm is beyond any trained model's (in double: no overflow before that).
  std::string bad;
  const double limit = static_cast<double>(kDivergedWeight) * static_cast<double>(kDivergedWeight);
  for (const Parameter* p : params) {
    if (p->value.empty() || p->value.dtype() != Dtype::f32) continue;
    Backend& be = p->value.owner() != nullptr ? *p->value.owner() : host_backend();
    if (!(be.sum_squares(p->value) <= limit)) {
      bad = p->name;
      break;
    }
  }
  uint8_t any = bad.empty() ? 0 : 1;
  for (comm::Communicator* g : groups) {
    if (!comm::is_active(g)) continue;
    const std::vector<uint8_t> all = comm::all_gather_value(*g, any, "finite weights flag");
    any = std::any_of(all.begin(), all.end(), [](uint8_t b) { return b != 0; }) ? 1 : 0;
  }
  if (any == 0) return;
  throw_divergence_finding(divergence_where(divergence.epoch, 0) + " (after its last step)",
                           fmt::format("the model's weights ({}) are not all finite (or their norm is beyond 1e15)",
                                       bad.empty() ? "on another rank" : bad),
                           divergence.lr);
}

void finish(FitResult& result, double loss_sum, comm::Communicator* replicas, const DivergencePolicy& divergence) {
  result.group_samples = result.samples;
  size_t skipped = result.skipped_batches;
  if (comm::is_active(replicas)) {  // the epoch's loss over all replicas' points
    std::vector<float> sums{static_cast<float>(loss_sum), static_cast<float>(result.samples),
                            static_cast<float>(result.skipped_batches)};
    replicas->all_reduce(sums).wait();
    loss_sum = sums[0];
    result.samples = static_cast<size_t>(std::llround(sums[1]));
    skipped = static_cast<size_t>(std::llround(sums[2]));
  }
  // Every rank holds the same sums here: they stop together, before any checkpoint of the epoch.
  if (!std::isfinite(loss_sum))
    throw_divergence(divergence_where(divergence.epoch, result.diverged_step), "training loss", loss_sum,
                     divergence.lr);
  if (result.samples == 0 && skipped > 0)
    throw_divergence(divergence_where(divergence.epoch, 0), "training loss of every batch", std::nan(""),
                     divergence.lr);
  result.loss_sum = loss_sum;
  result.loss = result.samples > 0 ? loss_sum / static_cast<double>(result.samples) : 0.0;
  result.samples_per_s = result.seconds > 0 ? static_cast<double>(result.samples) / result.seconds : 0.0;
}

}  // namespace frugal::train::epoch
