// DlrmTrainer (train/, above the layers it trains):
// mini-batch training and evaluation of a DlrmNetwork on click-through data held in a
// CtrView (a data set in memory). Each epoch visits the samples in a seeded random order; each step
// maps the batch's ids to rows (IdMap), runs forward and backward, and applies the optimizer
// (lazy Adam by default: an embedding row is updated only in the steps that used it).
//
// With the network's group (DlrmOptions::group, DES): every rank holds the whole data set and walks
// the same shuffled order; each global batch of `batch` samples is split into contiguous parts, one
// per rank (CtrBatches, train/ctr_batches.h), so the group trains as one rank would with that batch. Losses, AUC and
// logloss are over the group's samples, the same on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/optim/optimizer.h"
#include "train/trainer.h"
#include "comm/exchange.h"
#include "layers/dlrm/ctr_view.h"
#include "layers/dlrm/dlrm_network.h"
#include "layers/dlrm/id_map.h"

namespace frugal::data {
template <class Pool>
class BlockStream;
struct CtrBatch;
using CtrStream = BlockStream<CtrBatch>;
}  // namespace frugal::data

namespace frugal::train {

// AUC and logloss of click probabilities (core/binary_metrics.h): AUC is NaN when the set has only
// clicks or only non-clicks.
struct ClickMetrics {
  double auc = 0, logloss = 0;
  size_t samples = 0, clicks = 0;
};

struct DlrmTrainOptions {
  optim::Options optimizer = optim::Adam{};
  size_t batch = 128;
  // Progress lines during fit_epoch (core/progress.h): a bar on a terminal, every ~10% or
  // 30 s otherwise. Its loss is this rank's running mean (the epoch line has the group's).
  bool progress = false;
  // The learning rate over the run (--lr-schedule, --warmup-steps; the optimizer's step count,
  // which a checkpoint keeps, is the schedule's step) and the global gradient-norm clip (--clip-norm
  // C, 0: off), taken over the whole model after the group's exchanges, as the XMC trainer's.
  optim::LrSchedule lr_schedule{};
  float clip_norm = 0.0f;
  // With a group: DCT-DP on the MLPs' gradients (the thresholded ReplicaReducer: each rank sends
  // the entries above its threshold, the rest is fed back); unset: an exact sum. `exchanges` makes
  // the reducers (null: comm::comm_exchanges()).
  std::optional<comm::DpCompression> dp = std::nullopt;
  const comm::ExchangeFactory* exchanges = nullptr;
};

class DlrmTrainer {
 public:
  DlrmTrainer(layers::DlrmNetwork& network, const layers::IdMap& ids, const DlrmTrainOptions& options);

  // One pass over `train` in the order Rng(seed) shuffles it (CtrBatches); at most max_steps steps
  // (0: all). label names the pass in progress lines ("train epoch 3"); `epoch` names where a
  // diverged step was in its error. The steps run in the skeleton every trainer shares
  // (epoch::run_steps: counts, compute time, the divergence rule), and after the epoch every weight
  // must be finite on every rank (epoch::require_finite_weights), as after the XMC trainers'. The
  // result's loss, samples and samples/s are the group's (the same on every rank); wire bytes are
  // the run's to count.
  // A part of an epoch (scoring the validation set within a long one): the first `skip_steps`
  // batches of the epoch's order are skipped (an earlier part trained them), and with `end_epoch`
  // false the deferred updates (--update-threshold) stay for the next part, so the parts train what
  // one call would.
  FitResult fit_epoch(const layers::CtrView& train, uint64_t seed, size_t max_steps = 0, const std::string& label = "train",
                      uint64_t epoch = 0, size_t skip_steps = 0, bool end_epoch = true);
  // The same from a stream of a packed file (core/data/ctr_stream.h): its next `max_steps` global
  // batches (0: the rest of its epoch). An epoch scored in parts calls it once a part, on one stream.
  FitResult fit_stream(data::CtrStream& stream, size_t max_steps, const std::string& label, uint64_t epoch,
                       bool end_epoch);
  // AUC and logloss of the network's click probabilities on `test`.
  ClickMetrics evaluate(const layers::CtrView& test, size_t batch = 4096);
  // Click probabilities of every sample of `data`, in order.
  void predict(const layers::CtrView& data, std::vector<float>& probabilities, size_t batch = 4096);

  optim::Optimizer& optimizer() { return *optimizer_; }
  // The MLP gradients' payload this rank sent over the group, and what the exact sum would have
  // sent (both 0 without a group); their ratio is DCT-DP's compression.
  uint64_t dp_payload_sent() const { return dense_reducer_ ? dense_reducer_->payload_sent() : 0; }
  uint64_t dp_payload_uncompressed() const { return dense_reducer_ ? dense_reducer_->payload_uncompressed() : 0; }

 private:
  // fit_epoch's and fit_stream's steps over either loader; `total`: the group's samples to train.
  template <class Loader>
  FitResult fit_with(Loader& batches, const FitOptions& fit, size_t total, uint64_t epoch_number);

  layers::DlrmNetwork& network_;
  const layers::IdMap& ids_;
  DlrmTrainOptions options_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  // The group's sums after each step's backward pass (comm/'s ReplicaReducer, as every trainer's):
  // the MLPs' gradients (one dense all-reduce, or DCT-DP), and with replicated tables theirs
  // (dense, listing the rows whose sum is not zero, so lazy Adam moves the rows some rank used).
  std::unique_ptr<comm::ReplicaReducer> dense_reducer_, table_reducer_;
  std::vector<uint32_t> rows_;
  // The sum of `value` over the group (exactly: gathered, then summed in rank order).
  double group_sum(double value) const;

};

}  // namespace frugal::train
