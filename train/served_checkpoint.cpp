#include "train/served_checkpoint.h"

#include <filesystem>

#include "train/checkpoint_manifest.h"

namespace frugal::train {

ServedCheckpoint served_checkpoint(const std::string& folder, bool accept_unchecked) {
  const CheckpointManifest newest = read_manifest(folder, accept_unchecked);
  ServedCheckpoint out{.dir = folder, .epoch = newest.epoch, .newest_epoch = newest.epoch};
  const nlohmann::json& state = newest.run_state;
  if (!state.is_object() || !state.contains("early_stopping") || !state["early_stopping"].is_object()) return out;
  const nlohmann::json& best_epoch = state["early_stopping"].value("best_epoch", nlohmann::json());
  if (!best_epoch.is_number_unsigned() || best_epoch.get<uint64_t>() == 0 || best_epoch.get<uint64_t>() == newest.epoch)
    return out;
  const std::filesystem::path best = std::filesystem::path(folder) / "best";
  if (!std::filesystem::is_regular_file(best / "manifest.json")) return out;
  const CheckpointManifest kept = read_manifest(best.string(), accept_unchecked);
  if (kept.epoch != best_epoch.get<uint64_t>() || kept.run != newest.run) return out;  // not this run's best
  return {.dir = best.string(), .epoch = kept.epoch, .newest_epoch = newest.epoch, .best = true};
}

}  // namespace frugal::train
