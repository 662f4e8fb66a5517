#include "train/best_epoch.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/check.h"
#include "core/model.h"
#include "train/checkpoint.h"

namespace frugal::train {

BestEpoch::BestEpoch(size_t patience, std::string best_dir, std::string earlier_dir, bool in_memory)
    : stopper_(patience), best_dir_(std::move(best_dir)), earlier_dir_(std::move(earlier_dir)), in_memory_(in_memory) {}

void BestEpoch::resume(const nlohmann::json& run_state) {
  if (!run_state.is_object() || !run_state.contains("early_stopping")) return;
  const auto& e = run_state["early_stopping"];
  stopper_ = EarlyStopping(stopper_.patience(), {.best = e.at("best"), .best_epoch = e.at("best_epoch"),
                                                 .epochs_without_improvement = e.at("epochs_without_improvement"),
                                                 .best_step = e.value("best_step", uint64_t{0})});
}

bool BestEpoch::record(uint64_t epoch, double score, const Model& model,
                       const std::function<void(const std::string&)>& save, uint64_t step, bool epoch_end) {
  if (!stopper_.update(epoch, score, step, epoch_end)) return false;
  if (!best_dir_.empty()) {
    save(best_dir_);
  } else if (in_memory_) {
    snapshot_.take(model);
    snapshot_epoch_ = epoch;
    snapshot_step_ = stopper_.state().best_step;
  }
  return true;
}

bool BestEpoch::record(uint64_t epoch, double score, const std::function<void(const std::string&)>& save, uint64_t step,
                       bool epoch_end) {
  FRUGAL_CHECK(!in_memory_ || !best_dir_.empty(), "BestEpoch: keeping the best epoch in memory needs its model");
  if (!stopper_.update(epoch, score, step, epoch_end)) return false;
  if (!best_dir_.empty()) save(best_dir_);
  return true;
}

nlohmann::json BestEpoch::run_state(size_t epoch_step, size_t batch) const {
  nlohmann::json state = run_state();
  state["epoch_step"] = epoch_step;
  state["epoch_batch"] = batch;
  return state;
}

namespace {
size_t count_field(const nlohmann::json& run_state, const char* name) {
  if (!run_state.is_object() || !run_state.contains(name)) return 0;
  const nlohmann::json& v = run_state[name];
  FRUGAL_CHECK(v.is_number_unsigned(), fmt::format("the checkpoint's run_state.{} is {}, not a count", name, v.dump()));
  return v.get<size_t>();
}
}  // namespace

size_t epoch_step_of(const nlohmann::json& run_state) { return count_field(run_state, "epoch_step"); }
size_t epoch_batch_of(const nlohmann::json& run_state) { return count_field(run_state, "epoch_batch"); }

nlohmann::json BestEpoch::run_state() const {
  const EarlyStopping::State& s = stopper_.state();
  return {{"early_stopping", {{"best", s.best}, {"best_epoch", s.best_epoch}, {"best_step", s.best_step},
                              {"epochs_without_improvement", s.epochs_without_improvement}}}};
}

bool BestEpoch::is_best(const EarlyStopping::State& best, uint64_t epoch, uint64_t step) {
  // A best within epoch E was saved before E completed (its checkpoint counts E - 1 epochs), at its
  // step; an epoch's end, with E completed.
  return best.best_step != 0 ? step == best.best_step && epoch + 1 == best.best_epoch : epoch == best.best_epoch;
}

uint64_t BestEpoch::restore(Model& model, uint64_t last_epoch, const std::function<void(const std::string&)>& load) {
  const EarlyStopping::State& state = stopper_.state();
  const uint64_t best = state.best_epoch;
  if (best == 0 || (best == last_epoch && state.best_step == 0)) return last_epoch;
  if (!snapshot_.empty() && snapshot_epoch_ == best && snapshot_step_ == state.best_step) {
    snapshot_.restore(model);
    return best;
  }
  // Saved in a folder: this run's, or the resumed run's when the best is from before the resume.
  for (const std::string& dir : {best_dir_, earlier_dir_}) {
    if (dir.empty() || !std::filesystem::exists(std::filesystem::path(dir) / "manifest.json")) continue;
    const CheckpointInfo kept = read_checkpoint_manifest(dir);
    if (!is_best(state, kept.epoch, kept.step)) continue;  // another epoch's (another run's) best
    load(dir);
    return best;
  }
  return last_epoch;
}

}  // namespace frugal::train
