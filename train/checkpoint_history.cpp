#include "train/checkpoint_history.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::train {
namespace fs = std::filesystem;
namespace {

// (epoch, step) of a folder named "epoch-E-step-S"; folders named otherwise sort oldest.
std::tuple<bool, uint64_t, uint64_t> folder_order(const std::string& name) {
  uint64_t epoch = 0, step = 0;
  int used = 0;
  const bool parsed = std::sscanf(name.c_str(), "epoch-%" SCNu64 "-step-%" SCNu64 "%n", &epoch, &step, &used) == 2 &&
                      static_cast<size_t>(used) == name.size();
  return {parsed, epoch, step};
}

bool has_manifest(const std::string& dir, const std::string& folder) {
  return fs::is_regular_file(fs::path(dir) / folder / "manifest.json");
}

}  // namespace

std::vector<std::string> checkpoint_folders(const std::string& dir) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("epoch-", 0) == 0) folders.push_back(name);
  }
  std::sort(folders.begin(), folders.end(),
            [](const std::string& a, const std::string& b) { return folder_order(a) > folder_order(b); });
  return folders;
}

std::string newer_checkpoint_of_run(const std::string& dir, const CheckpointManifest& top) {
  if (top.run.empty()) return "";
  for (const std::string& folder : checkpoint_folders(dir)) {
    if (folder == top.folder || !has_manifest(dir, folder)) continue;
    const auto [parsed, epoch, step] = folder_order(folder);
    if (!parsed || std::make_pair(epoch, step) <= std::make_pair(top.epoch, top.step)) continue;
    try {
      const CheckpointManifest m = read_manifest(dir, fs::path(dir) / folder / "manifest.json");
      if (m.run != top.run || std::make_pair(m.epoch, m.step) <= std::make_pair(top.epoch, top.step)) continue;
      verify_checkpoint_files(dir, m);
      return folder;
    } catch (const Error&) {
      // A damaged folder is no newer checkpoint.
    }
  }
  return "";
}

std::string older_manifest_warning(const std::string& dir, const CheckpointManifest& top) {
  const std::string newer = newer_checkpoint_of_run(dir, top);
  if (newer.empty()) return "";
  return fmt::format("{}/manifest.json names epoch {} (step {}), but {}/{} holds a later checkpoint of the same run: "
                     "manifest.json is an older copy, or a save died before committing; using epoch {}",
                     dir, top.epoch, top.step, dir, newer, top.epoch);
}

CheckpointChoice newest_intact_checkpoint(const std::string& dir, bool accept_unchecked) {
  const fs::path top = fs::path(dir) / "manifest.json";
  std::vector<fs::path> candidates{top};
  std::string top_folder;
  try {
    top_folder = read_manifest(dir, accept_unchecked).folder;
  } catch (const Error&) {
    // A damaged top manifest is reported below, when it is tried; its folder is unknown here.
  }
  for (const std::string& folder : checkpoint_folders(dir))
    if (folder != top_folder && has_manifest(dir, folder)) candidates.push_back(fs::path(dir) / folder / "manifest.json");
  if (!fs::exists(top) && candidates.size() == 1)
    throw Error(fmt::format("{}: no checkpoint here (cannot read manifest.json)", dir));
  CheckpointChoice choice;
  for (const fs::path& path : candidates) {
    if (!fs::exists(path)) {
      choice.skipped.push_back({path.string(), "missing"});
      continue;
    }
    try {
      CheckpointManifest manifest = read_manifest(dir, path, accept_unchecked);
      verify_checkpoint_files(dir, manifest);
      choice.manifest = std::move(manifest);
      choice.manifest_file = path.string();
      return choice;
    } catch (const Error& e) {
      choice.skipped.push_back({path.string(), e.what()});
    }
  }
  std::string why;
  for (const auto& s : choice.skipped) why += fmt::format("\n  {}: {}", s.manifest, s.reason);
  throw Error(fmt::format("{}: no intact checkpoint to resume from; tried, newest first:{}", dir, why));
}

void keep_folder_manifest(const std::string& dir) {
  const fs::path top = fs::path(dir) / "manifest.json";
  if (!fs::is_regular_file(top)) return;
  try {
    const CheckpointManifest current = read_manifest(dir, /*accept_unchecked=*/true);
    if (fs::is_directory(fs::path(dir) / current.folder) && !has_manifest(dir, current.folder))
      fs::copy_file(top, fs::path(dir) / current.folder / "manifest.json");
  } catch (const Error&) {
    // A damaged top manifest leads nowhere: there is nothing to keep.
  }
}

void prune_checkpoints(const std::string& dir, const std::string& newest, size_t keep) {
  const auto newest_order = folder_order(newest);
  size_t kept = 1;  // `newest` itself
  for (const std::string& folder : checkpoint_folders(dir)) {
    if (folder == newest) continue;
    const bool older = folder_order(folder) < newest_order;
    if (older && kept < keep && has_manifest(dir, folder)) {
      ++kept;
      continue;
    }
    fs::remove_all(fs::path(dir) / folder);
  }
}

}  // namespace frugal::train
