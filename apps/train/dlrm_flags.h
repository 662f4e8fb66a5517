// `frugal train --model dlrm`'s own flags (--ids, --embedding-dim, ...) into the run API's DlrmArgs
// (train/run/dlrm_run.h).
#pragma once

#include <CLI/CLI.hpp>

#include "train/run/dlrm_run.h"

namespace frugal::cli {

void add_dlrm_options(CLI::App* cmd, run::DlrmArgs& a);

}  // namespace frugal::cli
