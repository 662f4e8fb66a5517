// The FRUGAL_* settings (comm/environment.h) as flags of a command (`frugal train`): one flag per
// variable, the flag winning over the variable. Values are checked while CLI11 parses (so a typo
// fails on one rank too, before any data is read) and again by comm::init, whose errors then name
// the flag rather than the variable. CommFlags::add_to is the one list of them; README's table of
// variables names each flag, and tests/readme_commands.py checks that every variable has one.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "comm/init.h"

namespace frugal::cli {

class CommFlags {
 public:
  // Adds one flag per FRUGAL_* variable to `cmd`, in a group of its help.
  void add_to(CLI::App* cmd);
  // Checks the numbers given (as comm::init will, naming the flag: "--size 'x': expected an
  // integer"), so that a typo fails before the data is read, on one rank too.
  void check() const;
  // comm::init's options: `run_config` plus every flag that was given, named by its flag.
  comm::InitOptions init_options(comm::RunConfig run_config) const;
  // The value given for `variable`'s flag (e.g. comm::env::kCommTimeout), when it was given.
  std::optional<std::string> given(std::string_view variable) const;
  // Whether `flag` (e.g. "--rank") is one of these flags.
  bool has_flag(std::string_view flag) const;

 private:
  struct Given {
    std::string flag;
    std::optional<std::string> value;  // set when the flag was given
    void (*check)(std::string_view flag, std::string_view value) = nullptr;
  };
  std::map<std::string_view, Given> values_;  // by variable
};

}  // namespace frugal::cli
