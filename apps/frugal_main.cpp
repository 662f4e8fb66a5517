// The `frugal` command: one binary, one subcommand per task (train, data, predict, evaluate, launch,
// keygen, bench, plan).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"

int main(int argc, char** argv) {
  CLI::App app{"frugal: sparse, model-parallel neural network training on cheap CPU clusters"};
  app.require_subcommand(1);
  frugal::cli::add_train_command(app);
  frugal::cli::add_data_command(app);
  frugal::cli::add_predict_command(app);
  frugal::cli::add_evaluate_command(app);
  frugal::cli::add_launch_command(app);
  frugal::cli::add_keygen_command(app);
  frugal::cli::add_bench_command(app);
  frugal::cli::add_plan_command(app);
  frugal::cli::refuse_negative_unsigned(app);  // after every command: CLI11 would wrap "-1"
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
