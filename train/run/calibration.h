// --slice-weights auto: the first epoch calibrated, the slices resized from the measured step
// times (and memory), ranks too slow to help left out of the model.
// Internal to train/run/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/dataset.h"
#include "comm/exchange.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/metrics_log.h"
#include "train/run/dct_cost.h"
#include "train/run/run_args.h"
#include "train/trainer.h"

namespace frugal::run {

// The folder the ranks reslice through (train/rebalance.h): rank 0 names it, every rank gets
// the name. Under --checkpoint DIR (which every rank sees), a subfolder of it; else the temporary
// folder (the ranks must share it: one host).
std::string reslice_folder(comm::Communicator& world, const std::string& checkpoint);

// The groups a run trains in, which --slice-weights auto may shrink: ranks it leaves out leave the
// model group (and the run's group: the world without them) and train no more.
struct RunGroups {
  comm::Communicator* world = nullptr;           // the ranks still training (all, until some leave)
  std::unique_ptr<comm::Communicator>& model;    // this rank's model group
  std::vector<std::unique_ptr<comm::Communicator>>& retired;  // groups replaced (kept alive)
  bool left = false;                             // this rank was left out
};

// The first epoch of a --slice-weights auto run: --calibration-warmup steps, --calibration-steps
// timed steps, the new weights from the group's step times, the model resliced onto them, then the
// rest of the epoch. Every rank computes the same weights from the same gathered times. Ranks the
// weighting leaves out leave the groups (groups.left): their messages no longer hold the others up.
train::FitResult calibrated_epoch(const RunArgs& a, const data::Dataset& train, const train::FitOptions& fit_options,
                           RunGroups& groups, const Grid& grid, Model& model, std::optional<train::Trainer>& trainer,
                           const std::function<void(Model&, const std::vector<double>&)>& build, train::MetricsLog& log);

}  // namespace frugal::run
