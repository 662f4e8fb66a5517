// `frugal train`: its flags, made from the run API's option declarations (train/run/train_options.h:
// every option's name, help, default, range and setter), and one call to run::train
// (train/run/run.h), which does the rest. Every default, check and refusal of a training run lives
// in the library, so that the C++ API and the Python module get the same run (docs/architecture.md,
// "The C++ API").
#include <memory>

#include <CLI/CLI.hpp>

#include "apps/commands.h"
#include "apps/option_flags.h"
#include "train/run/run.h"
#include "train/run/train_options.h"

namespace frugal::cli {

void add_train_command(CLI::App& app) {
  auto config = std::make_shared<run::TrainConfig>();
  CLI::App* cmd = app.add_subcommand("train", "train the XMC network: sparse input -> hidden (ReLU) -> softmax");
  add_declared_options(cmd, *config, run::train_options());
  cmd->callback([config] { run::train(*config); });
}

}  // namespace frugal::cli
