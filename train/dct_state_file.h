// The DCT-DP part of a checkpoint: each replica's error-feedback residuals, thresholds and
// schedules (comm/dct/thresholder.h), one file per rank, so a resumed run on the same grid continues
// exactly as an uninterrupted one. Replicas differ here, unlike the model slices.
#pragma once

#include <string>

#include "train/trainer.h"

namespace frugal::train {

// The file of this rank (replica `replica` of model slice `slice`), relative to the epoch folder.
std::string dct_state_file_name(int replica, int slice);
// The trainer's DCT-DP state as bytes (cereal binary with magic and version).
std::string encode_dct_state(const Trainer& trainer);
// Restores the trainer's DCT-DP state from `path`; fails naming the file when it is truncated,
// forged, or belongs to another model.
void load_dct_state(const std::string& path, Trainer& trainer);

}  // namespace frugal::train
