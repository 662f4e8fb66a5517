// The JSON side of checkpoints (train/checkpoint.h): the run's configuration, which a resumed
// run must agree with, the parameters' slicing, the optimizer record and the run's own resume state.
// Internal (the frugal command, the Predictor and tests use it): the public API stays free of JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"

namespace frugal::train {

struct CheckpointManifest : CheckpointInfo {
  nlohmann::json config;
  nlohmann::json parameters;  // per parameter: name, sliced_axis, shape, slice_bounds
  // The optimizer whose state the files hold ({"method", "sparse_updates"}; empty: lazy Adam) and
  // what the run saved with it (e.g. early stopping's state).
  nlohmann::json optimizer, run_state;
  // CRC32C of each file the manifest names (slice files, DCT residual files), by its path relative
  // to the checkpoint directory; empty for checkpoints saved before checksums (loaded unchecked).
  std::map<std::string, uint32_t> checksums;
  // Every file of the checkpoint (slice files, then DCT residual files), relative to the directory.
  std::vector<std::string> files;
  // The checksum (16 hex digits: the data fingerprint's hash) of each file kept beside the
  // checkpoint (kCheckpointMemberFiles) when it was saved; has_member_checksums: the manifest
  // records them (older manifests do not).
  std::map<std::string, std::string> member_checksums;
  bool has_member_checksums = false;
};

// The files a run keeps beside its checkpoint (DIR/<name>): the training label counts, the
// ensemble's label centroids and nearest points. Listed with their checksums in the manifest.
inline constexpr const char* kCheckpointMemberFiles[] = {"label_counts.bin", "label_centroids.bin",
                                                         "nearest_points.bin"};

// Whether DIR/name (a member file) exists; when it does, that it is the one the manifest recorded:
// a file of another run or changed since is an error naming it, or with `accept_unchecked`
// (--accept-unchecked-checkpoint) a warning. The one check every reader of a member file calls.
bool verify_member_file(const std::string& dir, const CheckpointManifest& info, const std::string& name,
                        bool accept_unchecked);

// save_checkpoint with the run's configuration and `run_state`: anything else the run needs to
// resume (kept in the manifest, returned by load). The newest `keep` checkpoints stay in `dir`, each
// epoch folder with a copy of its manifest (train/checkpoint_history.h); older ones are removed.
void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer, const nlohmann::json& config,
                     const nlohmann::json& run_state = nlohmann::json::object(), size_t keep = 1);
// load_checkpoint; settings present in both `config` and the checkpoint must agree.
CheckpointManifest load_checkpoint(const std::string& dir, Model& model, Trainer& trainer,
                                   const nlohmann::json& config);
// The same from a manifest already read (e.g. the one newest_intact_checkpoint chose).
CheckpointManifest load_checkpoint(const std::string& dir, CheckpointManifest manifest, Model& model, Trainer& trainer,
                                   const nlohmann::json& config);
// The whole manifest, checked: its own checksum ("manifest_checksum", core/sealed_json.h; a manifest
// without one is refused unless `accept_unchecked`: the user's --accept-unchecked-checkpoint), then
// every field's type and range (errors name manifest.json and the field).
CheckpointManifest read_manifest(const std::string& dir, bool accept_unchecked = false);
// The manifest read from `in`, checked the same way; `file` names it in errors.
CheckpointManifest parse_manifest(std::istream& in, const std::string& file, bool accept_unchecked = false);
// The manifest in file `path` (dir/manifest.json, or the copy in an epoch folder); the files it
// names are relative to `dir`.
CheckpointManifest read_manifest(const std::string& dir, const std::filesystem::path& path,
                                 bool accept_unchecked = false);
// load_weights (train/checkpoint.h) from a manifest already read (and checked as the caller chose).
CheckpointInfo load_weights(const std::string& dir, const CheckpointManifest& manifest, Model& model,
                            comm::Communicator* group);
// Every file the manifest names exists and matches its CRC32C (all slices, not only this rank's):
// what makes a checkpoint intact. Throws an Error naming the first file that is not.
void verify_checkpoint_files(const std::string& dir, const CheckpointManifest& manifest);

// The resume check of the settings every trainer makes (the XMC network's, the pipeline's and
// DLRM's checkpoints alike): each of `wanted` (this run's settings that a checkpoint must share)
// that `saved` also holds must be equal, or it throws frugal::Error "WHERE: the checkpoint was saved
// with KEY = SAVED, this run has KEY = WANTED". Keys `saved` lacks (older checkpoints) pass, and so
// does `precision`, recorded but not compared: parameter files hold f32 whatever the storage, so a
// checkpoint resumes in either.
void require_same_settings(const nlohmann::json& saved, const nlohmann::json& wanted, const std::string& where);

}  // namespace frugal::train
