// Which checkpoint of a folder a reader serves (`frugal predict` / `evaluate`, Python's
// `frugal.load` and `Model`, the Predictor): the run's best epoch on its validation set. A training
// run keeps the newest checkpoint in the folder (what --resume continues) and the best one in
// FOLDER/best (train/best_epoch.h); the newest manifest's run state names the best epoch, so a
// best/ left by another run, or by this run before a newer best, is never served.
#pragma once

#include <cstdint>
#include <string>

namespace frugal::train {

struct ServedCheckpoint {
  std::string dir;            // the folder to load: `folder` or `folder`/best
  uint64_t epoch = 0;         // its epoch
  uint64_t newest_epoch = 0;  // the folder's newest checkpoint's epoch
  bool best = false;          // dir is `folder`/best (a better epoch than the newest)
};

// `folder`: a checkpoint folder (or a best/ folder, served as it is). The manifests are read as
// read_manifest reads them (a damaged one is refused, naming the file).
ServedCheckpoint served_checkpoint(const std::string& folder, bool accept_unchecked = false);

}  // namespace frugal::train
