#include "train/run/calibration.h"
#include "train/run/epoch_parts.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "comm/codec.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "comm/routed_communicator.h"
#include "core/backend.h"
#include "core/communicator.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/fingerprint.h"
#include "core/data/label_counts_file.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/output.h"
#include "core/parse.h"
#include "core/propensity.h"
#include "core/quote.h"
#include "core/rng.h"
#include "core/say.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/early_stopping.h"
#include "train/metrics_log.h"
#include "train/rebalance.h"
#include "train/resume_choice.h"
#include "train/run/calibration.h"
#include "train/run/compression.h"
#include "train/run/data_defaults.h"
#include "train/run/dct_cost.h"
#include "train/run/dlrm_run.h"
#include "train/run/dp_transport.h"
#include "train/run/epoch_report.h"
#include "train/run/infer_choice.h"
#include "train/run/memory_check.h"
#include "train/run/pipeline_run.h"
#include "train/run/rank_threads.h"
#include "train/run/run_notes.h"
#include "train/run/run_settings.h"
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/trained_model.h"
#include "train/trainer.h"

namespace frugal::run {

std::string reslice_folder(comm::Communicator& world, const std::string& checkpoint) {
  std::string name;
  if (world.rank() == 0) {
    const auto base = checkpoint.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(checkpoint);
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    name = (base / fmt::format("reslice-{}-{}", static_cast<long>(::getpid()), ticks)).string();
  }
  const auto* chars = reinterpret_cast<const std::byte*>(name.data());
  std::vector<std::byte> bytes(chars, chars + name.size());  // empty on the ranks that receive
  world.broadcast_bytes(bytes, 0).wait();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

train::FitResult calibrated_epoch(const RunArgs& a, const data::Dataset& train, const train::FitOptions& fit_options,
                           RunGroups& groups, const Grid& grid, Model& model, std::optional<train::Trainer>& trainer,
                           const std::function<void(Model&, const std::vector<double>&)>& build, train::MetricsLog& log) {
  comm::Communicator& world = *groups.world;
  const train::Parallelism parallel = trainer->parallel();
  // A part of the epoch: `steps` steps (0: to the end) after `skip`, within --max-steps.
  const auto part = [&](size_t skip, size_t steps, bool end, const char* label) {
    return fit_part(*trainer, train, fit_options, skip, steps, end, label);
  };
  train::FitResult fit = a.calibration_warmup > 0 ? part(0, a.calibration_warmup, false, "warm-up") : train::FitResult{};
  const train::FitResult timed = part(fit.steps, a.calibration_steps, false, "calibrate");
  fit.merge(timed);
  const double mine = timed.steps > 0 ? timed.step_seconds() : fit.step_seconds();
  if (fit.steps == 0 || mine <= 0) {
    if (world.rank() == 0)
      say("--slice-weights auto: the epoch has no steps to calibrate on; the slices stay as they are\n");
  } else {
    const std::vector<double> times = train::gather_step_seconds(mine, parallel.model, parallel.data);
    const std::vector<double> current = model.input().placement().weights;
    // Each rank's share is capped by what its memory holds (Backend::state_memory_available()).
    // (No weights: equal slices.)
    const size_t me = comm::is_active(parallel.model) ? static_cast<size_t>(parallel.model->rank()) : 0;
    const double my_share = current.empty() ? 1.0 / static_cast<double>(times.size())
                                            : current[me] / std::accumulate(current.begin(), current.end(), 0.0);
    const double state_bytes = train::model_state_bytes(model, *trainer);
    std::optional<double> room;
    if (const std::optional<uint64_t> available = model.input().backend().state_memory_available())
      room = static_cast<double>(*available);
    if (a.memory_limit_mib > 0) {
      const double limit_room = std::max(0.0, a.memory_limit_mib * 1048576.0 - state_bytes);
      room = room ? std::min(*room, limit_room) : limit_room;
    }
    const std::vector<double> caps =
        train::gather_memory_caps(train::memory_cap(my_share, state_bytes, room), parallel.model, parallel.data);
    // What the exchanges cost a step with every rank in: what a kept rank adds besides compute.
    const train::FitResult& timed_part = timed.steps > 0 ? timed : fit;
    const double my_wait = (timed_part.seconds - timed_part.compute_seconds) / static_cast<double>(timed_part.steps);
    const double exchange = train::gather_exchange_seconds(my_wait, parallel.model, parallel.data);
    const train::RebalancePlan plan = train::throughput_weights(times, current, {.exchange_seconds = exchange, .max_share = caps});
    std::vector<size_t> labels(static_cast<size_t>(grid.model));
    const auto bounds = slice_bounds(model.output().out_features(), static_cast<size_t>(grid.model), plan.weights);
    for (size_t r = 0; r < labels.size(); ++r) labels[r] = bounds[r + 1] - bounds[r];
    if (world.rank() == 0) {
      say("--slice-weights auto: calibrated over {} steps (after {} warm-up); shares capped by each rank's "
                 "free memory\n", timed.steps > 0 ? timed.steps : fit.steps,
                 timed.steps > 0 ? fit.steps - timed.steps : 0);
      const double total_throughput = std::accumulate(plan.throughput.begin(), plan.throughput.end(), 0.0);
      for (size_t r = 0; r < times.size(); ++r) {
        const double throughput_share = 100.0 * plan.throughput[r] / total_throughput;
        std::string why;
        if (plan.left_out[r])
          why = current.empty() || current[r] > 0
                    ? fmt::format(" -- left out: its throughput is {:.1f}% of the group's, too little to pay for "
                                  "its exchanges or its minimum share", throughput_share)
                    : std::string(" -- left out (it held nothing)");
        else if (plan.raised[r])
          why = fmt::format(" raised to the minimum share: its throughput is {:.1f}% of the group's", throughput_share);
        else if (plan.capped[r])
          why = ", capped by its memory";
        say("  model rank {}: {:.5f} s/step, new share {:.4f} ({} labels), memory holds {}{}\n", r, times[r],
                   plan.weights[r], labels[r], caps[r] >= 1.0 ? std::string("all") : fmt::format("{:.4f}", caps[r]),
                   why);
      }
      say("  exchanges with every rank in: {:.5f} s/step; predicted step at the new shares: {:.5f} s (the "
                 "slowest member's compute, and the exchanges of the ranks kept)\n",
                 exchange, plan.predicted_step_seconds);
      if (std::find(plan.left_out.begin(), plan.left_out.end(), true) != plan.left_out.end())
        say("  the ranks left out leave the model group and train no more: the others no longer wait "
                   "for their messages\n");
    }
    log.write({{"event", "calibration"}, {"steps", timed.steps > 0 ? timed.steps : fit.steps},
               {"rank_step_seconds", times}, {"slice_weights", plan.weights}, {"slice_labels", labels},
               {"raised_to_minimum", plan.raised}, {"left_out", plan.left_out},
               {"predicted_step_seconds", plan.predicted_step_seconds}, {"exchange_seconds", exchange},
               {"memory_cap", std::find(plan.capped.begin(), plan.capped.end(), true) != plan.capped.end()},
               {"memory_caps", caps}, {"capped_by_memory", plan.capped},
               {"rank", world.rank()}});
    const std::string folder = reslice_folder(world, a.checkpoint);
    std::unique_ptr<comm::Communicator> new_world;
    if (std::find(plan.left_out.begin(), plan.left_out.end(), true) == plan.left_out.end()) {
      train::reslice(folder, model, trainer, build, plan.weights);
    } else {
      // The ranks kept form the new model group (in their old order) and slice it by their weights;
      // every replica leaves out the same model ranks, so the data groups of those kept stay whole.
      groups.left = plan.left_out[me];
      std::vector<double> kept;
      for (size_t r = 0; r < plan.weights.size(); ++r)
        if (!plan.left_out[r]) kept.push_back(plan.weights[r]);
      auto new_model = groups.model->split(groups.left ? 1 : 0, groups.model->rank());
      new_world = world.split(groups.left ? 1 : 0, world.rank());
      groups.retired.push_back(std::move(groups.model));
      groups.model = std::move(new_model);
      const train::Regroup regroup{.leave = groups.left, .model = groups.model.get()};
      train::reslice(folder, model, trainer, build, kept, &regroup);
    }
    world.barrier().wait();  // every rank has read the folder
    if (world.rank() == 0) std::filesystem::remove_all(folder);
    if (new_world) {
      groups.world = new_world.get();
      groups.retired.push_back(std::move(new_world));
      if (groups.left) return fit;
    }
  }
  fit.merge(part(fit.steps, 0, true, "train"));
  return fit;
}

}  // namespace frugal::run
