#include "train/served_checkpoint.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "train/best_epoch.h"
#include "train/checkpoint_manifest.h"
#include "train/dlrm_checkpoint.h"

namespace frugal::train {
namespace {

// What a folder's manifest says of the run that saved it, for either model's checkpoint.
struct SavedBy {
  uint64_t epoch = 0, step = 0;
  std::string run;
  nlohmann::json run_state;
};

SavedBy saved_by(const std::string& dir, bool accept_unchecked) {
  if (is_dlrm_checkpoint(dir)) {
    const DlrmCheckpointInfo m = read_dlrm_manifest(dir, accept_unchecked);
    return {m.epoch, m.step, m.run, nlohmann::json::parse(m.run_state)};
  }
  const CheckpointManifest m = read_manifest(dir, accept_unchecked);
  return {m.epoch, m.step, m.run, m.run_state};
}

}  // namespace

ServedCheckpoint served_checkpoint(const std::string& folder, bool accept_unchecked) {
  const SavedBy newest = saved_by(folder, accept_unchecked);
  ServedCheckpoint out{.dir = folder, .epoch = newest.epoch, .newest_epoch = newest.epoch};
  const nlohmann::json& state = newest.run_state;
  if (!state.is_object() || !state.contains("early_stopping") || !state["early_stopping"].is_object()) return out;
  const nlohmann::json& e = state["early_stopping"];
  const nlohmann::json best_epoch = e.value("best_epoch", nlohmann::json()), best_step = e.value("best_step", nlohmann::json(0));
  if (!best_epoch.is_number_unsigned() || !best_step.is_number_unsigned() || best_epoch.get<uint64_t>() == 0) return out;
  const EarlyStopping::State wanted{.best_epoch = best_epoch.get<uint64_t>(), .best_step = best_step.get<uint64_t>()};
  if (BestEpoch::is_best(wanted, newest.epoch, newest.step)) return out;  // the newest is the best
  const std::filesystem::path best = std::filesystem::path(folder) / "best";
  if (!std::filesystem::is_regular_file(best / "manifest.json")) return out;
  const SavedBy kept = saved_by(best.string(), accept_unchecked);
  if (!BestEpoch::is_best(wanted, kept.epoch, kept.step) || kept.run != newest.run) return out;  // not this run's best
  return {.dir = best.string(), .epoch = kept.epoch, .newest_epoch = newest.epoch, .best = true};
}

}  // namespace frugal::train
