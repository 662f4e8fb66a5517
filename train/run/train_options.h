// The one declaration of every training option: its flag (Python's keyword: the flag without
// "--", '-' as '_'), type, default, help, the values it accepts, and how its text becomes the
// TrainConfig field it sets. `frugal train`'s flags are made from this table (apps/train), Python's
// frugal.train reads its keywords through it (set_option), and run::train checks a C++ caller's
// fields against the same ranges (check_options). Which ranks must agree on an option is
// train/run/rank_agreement.h's table; which trainers implement it, train/run/trainer_support.h's.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/number_bounds.h"
#include "train/run/train_config.h"

namespace frugal::run {

// How an option's value is written: a count (unsigned), an integer, a real number, text, one of a
// few names, or a switch that takes no value.
enum class OptionType { count, integer, real, text, choice, switch_ };

// What an option is, whatever config it sets: its name, help, default, accepted values and the check
// of its text.
struct OptionSpec {
  std::string flag;  // "--batch"
  std::string help;  // what --help and docs/cli.md say
  OptionType type = OptionType::text;
  std::string default_text;          // the default as --help shows it ("": none shown)
  std::vector<std::string> choices;  // OptionType::choice: the names accepted
  NumberBounds bounds;               // numbers: the values accepted beyond the type's
  std::string accepts;               // text: what --help says it accepts ("FILE"; "": nothing to say)
  bool repeatable = false;           // given several times, every value kept (--dp-keep-param)
  bool required = false;             // the command line's --train, --test
  std::string group;                 // --help's group ("": the command's own options)
  bool cluster = false;              // how this rank joins the run (comm::InitOptions), not a setting of it
  // What is wrong with `text` as this option's value, or "" (the words after "--flag: ").
  std::function<std::string(const std::string& text)> check_text;
};

// An option of `Config`: its spec and how its text reaches the config's field.
template <class Config>
struct Option : OptionSpec {
  // Stores `text` (checked by check_text; a switch's is "on") into the config.
  std::function<void(Config&, const std::string& text)> store;
  // The value the config holds, as text ("": unset).
  std::function<std::string(const Config&)> text;
  // What is wrong with the value the config holds (a C++ caller's), or "".
  std::function<std::string(const Config&)> problem;

  // check_text, then store; throws frugal::Error("--flag: what is wrong").
  void set(Config& config, const std::string& value) const {
    if (check_text) {
      if (const std::string problem = check_text(value); !problem.empty()) throw Error(flag + ": " + problem);
    }
    store(config, value);
  }
};

// `frugal train`'s options (the inference and DLRM ones included), in --help's order.
const std::vector<Option<TrainConfig>>& train_options();
// The inference options (--infer, --ensemble-*), for `frugal predict` / `evaluate` too; `auto_help`
// ends --infer's help ("auto: ...").
std::vector<Option<InferSettings>> infer_options(const std::string& auto_help);
// The TrainConfig option named `flag` ("--batch"), or null.
const Option<TrainConfig>* find_train_option(std::string_view flag);

// Sets `flag` ("--batch") of `config` from `value` (a switch: "on" or "off"), checked as the command
// line checks it, and records it as given. Throws frugal::Error naming the flag.
void set_option(TrainConfig& config, std::string_view flag, const std::string& value);
// `frugal train ARGS...` read into a config without the command line: ARGS are "--flag VALUE" pairs
// and switches ("--quiet"). The errors are the command line's ("--batch: 0 is not positive: ...";
// "--threads: given 2 times; give it once").
TrainConfig parse_train_options(const std::vector<std::string>& args);
// Every option's value within what it accepts; throws frugal::Error naming the first that is not
// ("--tables: 0 is outside [1, 4096]"). run::train calls it first.
void check_options(const TrainConfig& config);
// The options the ranks must agree on (run::compared_as_given), as this config holds them: key as the
// run config names settings (--dp-keep -> dp_keep), value as text; unset ones are left out.
std::vector<std::pair<std::string, std::string>> agreed_settings(const TrainConfig& config);

}  // namespace frugal::run
