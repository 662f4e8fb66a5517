// The `frugal` command: one binary, one subcommand per task (train, data, predict, evaluate, launch,
// keygen, bench, plan, plot).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <exception>
#include <filesystem>
#include <new>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "core/check.h"

namespace {

// `frugal --list-flags` (hidden; tests/apps/test_flag_hostile.py): every option of every command, one
// JSON object a line: the command path, the flag's long name (or a positional's name), the type
// CLI11 reads it as, whether it takes a value, is required or positional, its default, and the range
// of frugal's own checks (interval / positive / non_negative, apps/cli_options.h) where it has one.
void list_flags(const CLI::App& app, const std::string& path) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty() && o->get_snames().empty() && o->get_name(true, false).empty()) continue;
    const bool positional = o->get_lnames().empty() && o->get_snames().empty();
    std::string flag = positional ? o->get_name(true, false)
                       : !o->get_lnames().empty() ? "--" + o->get_lnames().front() : "-" + o->get_snames().front();
    if (flag == "--help" || flag == "--help-all" || flag == "--list-flags") continue;
    // A number that also takes the word "auto" (apps/option_flags.h) is listed as its number type,
    // with the word beside it.
    std::string type = o->get_type_name().substr(0, o->get_type_name().find(':'));
    const bool auto_word = type.rfind("auto|", 0) == 0;
    if (auto_word) type = type.substr(5);
    nlohmann::json j = {{"command", path},
                        {"flag", flag},
                        {"type", type},
                        {"takes_value", o->get_items_expected_max() != 0},
                        {"required", o->get_required()},
                        {"positional", positional},
                        {"default", o->get_default_str()}};
    if (auto_word) j["word"] = "auto";
    for (int i = 0;; ++i) {
      const CLI::Validator* v = nullptr;
      try {
        v = const_cast<CLI::Option*>(o)->get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      if (!v->get_active()) continue;
      const std::string name = v->get_name();
      if (name == "positive" || v->get_description() == "POSITIVE") j["above"] = 0;
      if (name == "non-negative" || v->get_description() == "NONNEGATIVE") j["min"] = 0;
      // "range [1, 4096]", "range [0, 1)", "range (0, 1000]" (apps/cli_options.h, interval).
      if (name.rfind("range ", 0) == 0 && name.size() > 8) {
        const std::string range = name.substr(6);
        std::istringstream bounds(range.substr(1, range.size() - 2));
        double lo = 0, hi = 0;
        char comma = 0;
        if (bounds >> lo >> comma >> hi && comma == ',') {
          j["min"] = lo;
          j["max"] = hi;
          if (range.front() == '(') j["min_open"] = true;
          if (range.back() == ')') j["max_open"] = true;
        }
      }
      if (name == "number") j["checked"] = true;
    }
    std::printf("%s\n", j.dump().c_str());
  }
  for (const CLI::App* sub : app.get_subcommands({}))
    list_flags(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name());
}

// A flag given a value (`--quiet=garbage`, `--no-run-token=x`) that is none of CLI11's flag values:
// CLI11 reads it with std::stoll and lets std::invalid_argument ("stoll") escape. Looked for before
// parsing, in the command each token belongs to (the same name may take a value elsewhere: plan --json
// FILE, evaluate --json); tokens after `--` are a command's own.
std::string bad_flag_value(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") break;
    if (token.rfind("-", 0) != 0) {
      for (const CLI::App* sub : at->get_subcommands({}))
        if (sub->check_name(token)) {
          at = sub;
          break;
        }
      continue;
    }
    const size_t eq = token.find('=');
    if (token.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    const std::string name = token.substr(0, eq), value = token.substr(eq + 1);
    for (const CLI::App* level = at; level != nullptr; level = level->get_parent()) {
      const CLI::Option* option = level->get_option_no_throw(name);
      if (option == nullptr) continue;
      if (option->get_items_expected_max() == 0) {
        try {
          (void)CLI::detail::to_flag_value(value);
        } catch (const std::exception&) {
          return fmt::format("{}: '{}': this flag takes no value (give it alone, or ={{true,false}})", name, value);
        }
      }
      break;
    }
  }
  return {};
}

}  // namespace

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
  frugal::cli::check_numbers(app);  // after every command: every number read as the value it will be
  // Hidden: the flags of every command, for the generated per-flag test (tests/apps/test_flag_hostile.py).
  app.add_flag_callback("--list-flags", [&app] {
                          list_flags(app, "");
                          std::exit(0);
                        })
      ->group("");
  // Whatever a command printed must have reached its destination: `frugal predict > /dev/full`
  // or `--json` into a full disk is an error, not a success.
  const auto stdout_written = [] {
    if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return true;
    std::fprintf(stderr, "frugal: error: standard output: write failed: %s\n", std::strerror(errno));
    return false;
  };
  if (const std::string bad = bad_flag_value(app, argc, argv); !bad.empty()) {
    std::fprintf(stderr, "frugal: error: %s\n", bad.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const std::filesystem::filesystem_error& e) {  // a path the commands did not check first
    std::fprintf(stderr, "frugal: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 1;
  } catch (const std::system_error& e) {
    // fmt::print's failed write ("cannot write to file"): stdout on a full disk or a closed pipe.
    const bool output = std::string(e.what()).find("cannot write") != std::string::npos;
    std::fprintf(stderr, "frugal: error: %s%s\n", output ? "standard output: write failed: " : "",
                 e.code().message().c_str());
    return 1;
  } catch (const CLI::ArgumentMismatch& e) {
    std::fprintf(stderr, "frugal: error: %s\n", frugal::cli::parse_error_words(e).c_str());
    return 2;
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own exit code (it has said why)
  } catch (const CLI::ConversionError& e) {
    std::fprintf(stderr, "frugal: error: %s\n", frugal::cli::parse_error_words(e).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    // A usage error is exit code 2 (CLI11's own codes, 100 and up, mean nothing to a shell); help is 0.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const frugal::Error& e) {
    if (verbose && !e.where().empty())
      std::fprintf(stderr, "frugal: error: %s [%s]\n", e.what(), e.where().c_str());
    else
      std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes from flags and headers are checked before they are allocated (train/run/memory_check.h); what
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
  return stdout_written() ? 0 : 1;
}
