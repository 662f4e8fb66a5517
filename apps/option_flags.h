// The run API's option declarations (train/run/train_options.h) as CLI11 flags: each option's name,
// help, default, group and accepted values become the flag's, and a given value is stored through
// the declaration's own setter, so that the command line decides nothing the library does not.
// The flag's type name (UINT, INT, FLOAT, TEXT) is what check_numbers and `frugal --list-flags`
// read (apps/cli_options.h, frugal_main.cpp).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/run/train_options.h"

namespace frugal::cli {

template <class Config>
CLI::Option* add_declared_option(CLI::App* cmd, Config& target, const run::Option<Config>& o) {
  using run::OptionType;
  CLI::Option* flag = nullptr;
  if (o.type == OptionType::switch_) {
    flag = cmd->add_flag_callback(o.flag, [&target, o] { o.set(target, "on"); }, o.help);
    if (!o.group.empty()) flag->group(o.group);
    return flag;
  }
  if (o.repeatable) {
    flag = cmd->add_option_function<std::vector<std::string>>(
        o.flag, [&target, o](const std::vector<std::string>& values) {
          for (const std::string& v : values) o.set(target, v);
        },
        o.help);
    flag->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  } else {
    flag = cmd->add_option_function<std::string>(o.flag, [&target, o](const std::string& v) { o.set(target, v); }, o.help);
  }
  // A number whose unset state is a word ("auto": the run resolves it) accepts that word too: its
  // declaration reads the text, not check_numbers.
  const std::string word = o.default_text == "auto" && o.type != OptionType::text && o.type != OptionType::choice ? "auto|" : "";
  flag->type_name(word + (o.type == OptionType::count     ? "UINT"
                          : o.type == OptionType::integer ? "INT"
                          : o.type == OptionType::real    ? "FLOAT"
                                                          : "TEXT"));
  if (!o.default_text.empty()) flag->default_str(o.default_text);
  if (o.type == OptionType::choice) {
    flag->check(CLI::IsMember(o.choices));
  } else if (o.check_text) {
    flag->check(CLI::Validator([check = o.check_text](std::string& given) { return check(given); },
                               o.accepts.empty() ? o.bounds.description() : o.accepts, o.bounds.name()));
  }
  if (o.required) flag->required();
  if (!o.group.empty()) flag->group(o.group);
  return flag;
}

// Every option of `options`, storing into `target` (which must outlive parsing).
template <class Config>
void add_declared_options(CLI::App* cmd, Config& target, const std::vector<run::Option<Config>>& options) {
  for (const run::Option<Config>& o : options) add_declared_option(cmd, target, o);
}

}  // namespace frugal::cli
