// The training label counts kept next to a checkpoint (DIR/label_counts.bin), so that a saved
// model can be scored with propensity-scored metrics (PSP@k) without its training file.
// `frugal train --checkpoint DIR` writes it; a checkpoint without it simply has no propensities.
// Format (core/data/checked_file.h): magic "FRUGALLC", version 2 (uint32), training points
// (uint64), label count (uint64), the per-label point counts (uint64 each, label order), CRC32C.
#pragma once

#include <optional>
#include <string>

#include "core/propensity.h"

namespace frugal {

inline constexpr const char* kLabelCountsFile = "label_counts.bin";

// Writes DIR/label_counts.bin atomically (DIR is created if needed).
void save_label_counts(const std::string& dir, const LabelCounts& counts);
// Reads DIR/label_counts.bin; nullopt when there is none. A damaged, unchecked (version 1) or
// special file is an error naming it.
std::optional<LabelCounts> load_label_counts(const std::string& dir);

}  // namespace frugal
