// Which options each trainer implements, in one table: an option a trainer does not implement is
// refused by name (a run that silently did something else would be a wrong result), and one that
// does not apply to it is said to be ignored. The XMC/MLP trainer implements every option (its own
// combinations are checked where they are resolved: run_settings, compression).
#pragma once

#include "train/run/run_args.h"

namespace frugal::run {

enum class TrainerKind { network, pipeline, dlrm };

// Throws frugal::Error for the first option `a` uses that `kind` does not implement; says once which
// given options do not apply to it (a note).
void check_trainer_support(const RunArgs& a, TrainerKind kind);

}  // namespace frugal::run
