// DLRM checkpoints (`frugal train --model dlrm --checkpoint DIR / --resume DIR`, `frugal evaluate
// --model DIR`). DIR/manifest.json names the format ("frugal-dlrm"), the epoch, the ranks that saved
// it, the run's configuration and the files of the epoch's folder with a CRC32C each; the folder
// holds ids.bin (the id map, written by rank 0) and one rank<r>.bin per rank (cereal binary: each of
// its parameters' slice of rows with the optimizer's moments and per-row step counts). Files are
// written atomically and the manifest last, so a run that dies while saving leaves the previous
// checkpoint whole; the previous epoch's folder is removed once the new manifest is in place.
// Loading reslices: each rank takes the rows of its slice of every table from whichever files hold
// them, so a checkpoint saved on N ranks resumes on any number.
#pragma once

#include <cstdint>
#include <string>

#include "core/communicator.h"
#include "core/optim/optimizer.h"
#include "layers/dlrm/dlrm_network.h"
#include "layers/dlrm/id_map.h"

namespace frugal::train {

struct DlrmCheckpointInfo {
  uint64_t epoch = 0;
  int world_size = 1;
  std::string config;  // the saved configuration, a JSON object as text
  std::string folder;
  uint64_t step = 0;               // the optimizer's steps so far (0 in older checkpoints)
  std::string run;                 // the id of the run that saved it (empty in older checkpoints)
  std::string run_state = "{}";    // what the run needs to go on (early stopping's state), JSON text
};

// Collective over `group` (null: one rank). `config`: a JSON object (as text), what a resume must
// agree with. `run`: the run's id (rank 0's is recorded); `run_state`: a JSON object (as text) the
// manifest carries, such as the best epoch on validation (train/best_epoch.h), so a resumed run stops
// where the uninterrupted one would and a reader knows which epoch to serve (train/served_checkpoint.h).
void save_dlrm_checkpoint(const std::string& dir, const std::string& config, uint64_t epoch, const layers::IdMap& ids,
                          layers::DlrmNetwork& network, const optim::Optimizer& optimizer, comm::Communicator* group,
                          const std::string& run = {}, const std::string& run_state = "{}");
// Reads and checks DIR/manifest.json (its own checksum, core/sealed_json.h: one without it is refused
// unless `accept_unchecked`) and every file's checksum; throws frugal::Error naming the file or field
// that is wrong.
DlrmCheckpointInfo read_dlrm_checkpoint(const std::string& dir, bool accept_unchecked = false);
// The manifest's fields alone, checked as above, without reading the files it names.
DlrmCheckpointInfo read_dlrm_manifest(const std::string& dir, bool accept_unchecked = false);
// Whether DIR holds a DLRM checkpoint (its manifest says so).
bool is_dlrm_checkpoint(const std::string& dir);
layers::IdMap load_dlrm_ids(const std::string& dir, const DlrmCheckpointInfo& info);
// This rank's slices of every parameter (and, with an optimizer, its state and step count) from
// the checkpoint, whatever the number of ranks that saved it.
void load_dlrm_state(const std::string& dir, const DlrmCheckpointInfo& info, layers::DlrmNetwork& network,
                     optim::Optimizer* optimizer);

}  // namespace frugal::train
