// The checkpoints of one directory over time: what --keep-checkpoints keeps and where --resume falls
// back to. Layout: DIR/manifest.json names the newest committed checkpoint (the commit point, as
// before); each DIR/epoch-E-step-S/ holds one checkpoint's files and a copy of its manifest, so an
// older checkpoint can still be found after the top manifest has moved on. A directory saved before
// the copies existed (top manifest only) still resumes: the top manifest is always tried first.
// Internal (the frugal command and tests use it), like checkpoint_manifest.h.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "train/checkpoint_manifest.h"

namespace frugal::train {

// A checkpoint --resume passed over, and why (the error that names the damaged file or field).
struct SkippedCheckpoint {
  std::string manifest;  // the manifest file it was read from
  std::string reason;
};

struct CheckpointChoice {
  CheckpointManifest manifest;
  std::string manifest_file;               // the manifest it was read from
  std::vector<SkippedCheckpoint> skipped;  // newer candidates that were not intact, newest first
};

// The newest intact checkpoint of `dir`: the top manifest's, else the epoch folders' own manifests,
// newest first. Intact: the manifest is valid and every file it names (every rank's) exists and
// matches its CRC32C, so every rank of a run, reading the same directory, makes the same choice.
// Throws an Error naming every candidate and its fault when none is intact.
CheckpointChoice newest_intact_checkpoint(const std::string& dir, bool accept_unchecked = false);

// The epoch folder of `dir` that holds an intact checkpoint of the same run as `top` (the manifest
// read from DIR/manifest.json) at a later epoch or step; empty when there is none. Such a folder
// means the top manifest is an older copy put in place of the newest, or that a save died between
// writing its folder and committing it: readers say which epoch they use.
std::string newer_checkpoint_of_run(const std::string& dir, const CheckpointManifest& top);
// What readers warn when there is such a folder, naming both epochs and the one they use; empty
// when there is none.
std::string older_manifest_warning(const std::string& dir, const CheckpointManifest& top);

// The epoch folders of `dir` ("epoch-E-step-S"), newest (largest epoch, then step) first.
std::vector<std::string> checkpoint_folders(const std::string& dir);

// Before the top manifest is replaced: gives the checkpoint it names a copy of it in its folder when
// it has none (a directory saved before the copies existed), so that it stays a fallback.
void keep_folder_manifest(const std::string& dir);

// After `newest` was committed: keeps it and the `keep` - 1 next older folders that hold a manifest;
// removes every other epoch folder (older ones, unfinished ones, and any newer one: that is left
// from a run this one resumed before, a history no manifest leads to any more).
void prune_checkpoints(const std::string& dir, const std::string& newest, size_t keep);

}  // namespace frugal::train
