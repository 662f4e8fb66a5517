// `frugal train` inside another program (the Python module, python/frugal): the command line's
// flags, defaults, checks, output and checkpoints, declared once in cmd_train.cpp, with the data sets
// given in memory instead of files and a call after every epoch.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "train/run/run.h"

namespace frugal::cli {

struct InProcessTrain {
  // In place of the files of --train and --test (whose values then only name the sets in messages).
  // Moved into the run: they are empty afterwards.
  std::optional<data::Dataset> train, test;
  // Where the run's output and epoch records go (train/run/run.h), and what it returned.
  run::RunCallbacks callbacks;
  std::optional<run::RunResult> result;
};

// Runs `frugal train ARGS...` (args: what follows `train` on a command line). Throws frugal::Error
// with the command line's message when a flag is unknown or its value is refused, or the run fails.
void run_train_in_process(const std::vector<std::string>& args, InProcessTrain& data);

// `frugal train`'s flags, as --help lists them: the name (--batch), the default as --help shows it
// ("" when none) and whether the flag takes a value (false: a switch such as --quiet).
struct TrainFlag {
  std::string name, default_value;
  bool takes_value = true;
};
std::vector<TrainFlag> train_flags();

}  // namespace frugal::cli
