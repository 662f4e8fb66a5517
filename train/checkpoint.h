// Checkpoints. A directory holds manifest.json (format version, epoch, step, world size, grid, the
// slice ranges of every parameter, the files, the run's configuration) and one folder per saved
// epoch with one file per model slice (cereal binary: every parameter slice with its optimizer
// state -- Adam's moments or SGD's momentum, per-row step counts -- each layer's extra state such as
// LSH tables). The learning-rate schedule's position is the trainer's step. Files are written to a
// temporary name, fsync'ed and renamed; the manifest is replaced last and is the commit point, so a
// run that dies while saving leaves the previous checkpoint whole. Each epoch folder also holds a copy
// of its manifest, so that the older checkpoints a run keeps (train/checkpoint_history.h) can
// still be found and resumed.
//
// Loading onto the same number of model slices restores everything bit for bit (resume continues
// exactly; DCT-DP residuals, one file per rank, too when the grid is the same). Onto another
// number, each rank assembles its new slices (weights and optimizer state)
// from the old files and the LSH tables are rebuilt at the next step.
#pragma once

#include <cstdint>
#include <string>

#include "core/model.h"
#include "train/trainer.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {


inline constexpr uint32_t kCheckpointVersion = 2;

struct CheckpointInfo {
  uint64_t epoch = 0, step = 0;
  int world_size = 1, model_slices = 1;
  std::string folder;  // the epoch folder the manifest commits to
  std::string run;     // the run that saved it (Trainer::run_id; empty in manifests from before runs were named)
  int replicas = 1;    // data-parallel replicas of the saving run
  int pipeline_stages = 1;  // its pipeline stages (train/pipeline_checkpoint.h)
  // DCT-DP residuals: saved by the run; restored by load_checkpoint (same grid and --dp-keep only).
  bool has_dct_residuals = false, dct_residuals_restored = false;
};

// Collective over the trainer's model-parallel group (every rank of the run calls it).
// (train/checkpoint_manifest.h adds the run's configuration and resume state, as JSON.)
void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer);
// Restores model and trainer.
CheckpointInfo load_checkpoint(const std::string& dir, Model& model, Trainer& trainer);
CheckpointInfo read_checkpoint_manifest(const std::string& dir);
// The parameters only (no optimizer state, no layer state such as LSH tables): what inference
// needs. The model is sliced over `group` (null or 1 rank: everything here), whatever the number
// of slices the checkpoint was saved with. Collective only in that every rank reads the files.
CheckpointInfo load_weights(const std::string& dir, Model& model, comm::Communicator* group = nullptr);

}  // namespace frugal::train
