// The `frugal` command: one binary, one subcommand per task (train, data, predict, evaluate, launch,
// keygen, bench, plan, plot).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <exception>
#include <new>
#include <stdexcept>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"

int main(int argc, char** argv) {
  CLI::App app{"frugal: sparse, model-parallel neural network training on cheap CPU clusters"};
  app.require_subcommand(1);
  // Where in frugal's source an error was raised: for bug reports, not for users (also FRUGAL_VERBOSE=1).
  bool verbose = std::getenv("FRUGAL_VERBOSE") != nullptr && std::string(std::getenv("FRUGAL_VERBOSE")) != "0";
  app.add_flag("--verbose", verbose, "Errors also name where in frugal's source they were raised");
  app.fallthrough();  // `frugal train ... --verbose` as well as `frugal --verbose train ...`
  frugal::cli::add_train_command(app);
  frugal::cli::add_data_command(app);
  frugal::cli::add_predict_command(app);
  frugal::cli::add_evaluate_command(app);
  frugal::cli::add_launch_command(app);
  frugal::cli::add_keygen_command(app);
  frugal::cli::add_bench_command(app);
  frugal::cli::add_plan_command(app);
  frugal::cli::add_plot_command(app);
  frugal::cli::refuse_negative_unsigned(app);  // after every command: CLI11 would wrap "-1"
  try {
    app.parse(argc, argv);
  } catch (const CLI::ArgumentMismatch& e) {
    std::fprintf(stderr, "frugal: error: %s\n", frugal::cli::parse_error_words(e).c_str());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const frugal::Error& e) {
    if (verbose && !e.where().empty())
      std::fprintf(stderr, "frugal: error: %s [%s]\n", e.what(), e.where().c_str());
    else
      std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes from flags and headers are checked before they are allocated (apps/memory_check.h); what
    // still runs out is reported in these words, not the library's.
    std::fprintf(stderr, "frugal: error: out of memory: the run needs more than this machine has (see "
                         "--memory-limit, or use smaller sizes or more ranks)\n");
    return 1;
  } catch (const std::length_error&) {
    std::fprintf(stderr, "frugal: error: out of memory: a size from the input or the flags is too large to hold\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
