// What every subcommand does with its flags, in one place:
//  - add_choice: a flag whose value is one of a few names becomes the enum (or bool) the name
//    stands for, once, while CLI11 parses; nothing compares option strings afterwards. The names
//    are the library's own (to_string of the enum) unless given; help and errors are CLI11's
//    IsMember ones ("--format: bad not in {xmc,idx}").
//  - with_flag_names: the library names option fields in its errors ("SynthXmcOptions::features
//    must be > 0"), never flags; a command knows which flag fills which field and rethrows the
//    error naming the flag instead ("synth-xmc: --features must be > 0").
//  - refuse_negative_unsigned: a flag of an unsigned type refuses a negative value instead of
//    letting CLI11 wrap it (`--epochs -1` trained forever, `--warmup-steps -1` became 2^64-1).
// Numbers in flags are CLI11's; numbers in other text ("AxB", lists, variables) are core/parse.h's.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/device.h"
#include "core/warnings.h"

namespace frugal::cli {

// `flag` takes one of the names and stores its value in `target` (which must outlive parsing);
// help shows `target`'s name as the default.
template <class T>
CLI::Option* add_choice(CLI::App* cmd, const std::string& flag, T& target, std::vector<std::pair<std::string, T>> names,
                        const std::string& help) {
  std::vector<std::string> accepted;
  std::string current;
  for (const auto& [name, value] : names) {
    accepted.push_back(name);
    if (value == target) current = name;
  }
  CLI::Option* option = cmd->add_option_function<std::string>(
      flag,
      [&target, names](const std::string& given) {
        for (const auto& [name, value] : names)
          if (name == given) target = value;  // the one conversion; IsMember has checked `given`
      },
      help);
  option->check(CLI::IsMember(accepted));
  option->default_str(current);
  return option;
}

// The same with the library's names of `values` (to_string), in this order.
template <class E>
CLI::Option* add_choice(CLI::App* cmd, const std::string& flag, E& target, std::initializer_list<E> values,
                        const std::string& help) {
  std::vector<std::pair<std::string, E>> names;
  for (const E v : values) names.emplace_back(std::string(to_string(v)), v);
  return add_choice(cmd, flag, target, std::move(names), help);
}

// --device cpu|cuda|cuda:N|auto (core/device.h): the name is checked while CLI11 parses; whether
// that device exists is the command's to find out (resolve_device), once it runs.
inline CLI::Option* add_device_option(CLI::App* cmd, std::string& target) {
  CLI::Option* option = cmd->add_option("--device", target, "compute device: cpu, cuda, cuda:N, or auto (cuda when a "
                                                            "CUDA backend is available, else cpu); emulated: a device "
                                                            "for testing (host memory the host may not touch, every "
                                                            "byte crossing counted; kernels/emulated_backend.h)");
  option->capture_default_str();
  option->check(CLI::Validator(
      [](std::string& given) {
        return is_device_spec(given) ? std::string() : "'" + given + "' is not one of cpu, cuda, cuda:N, auto, emulated";
      },
      "cpu|cuda|cuda:N|auto|emulated", "device"));
  return option;
}

// Numeric checks that speak frugal's words (CLI11's own print its ranges as doubles with 300
// digits, "Value -5 not in range 0.000000 to 1.000000"): "-5 is outside [0, 1]". NaN and infinity are
// refused too. Values are read as doubles, which is exact for the bounds any flag has.
inline double parse_checked_number(const std::string& given, std::string& error) {
  char* end = nullptr;
  const double v = std::strtod(given.c_str(), &end);
  if (end == given.c_str() || *end != '\0') error = given + " is not a number";
  else if (!std::isfinite(v)) error = given + " is not a finite number";
  return v;
}

// A validator from `error_of(value)` (empty: accepted), after the number itself is checked.
template <class F>
CLI::Validator number_check(std::string description, std::string name, F error_of) {
  return CLI::Validator(
      [error_of](std::string& given) {
        std::string error;
        const double v = parse_checked_number(given, error);
        return error.empty() ? error_of(given, v) : error;
      },
      std::move(description), std::move(name));
}

template <class T>
CLI::Validator in_range(T lo, T hi) {
  return number_check(fmt::format("[{}, {}]", lo, hi), "in-range", [lo, hi](const std::string& given, double v) {
    return v < static_cast<double>(lo) || v > static_cast<double>(hi) ? fmt::format("{} is outside [{}, {}]", given, lo, hi)
                                                                       : std::string();
  });
}

inline CLI::Validator positive() {
  return number_check("> 0", "positive", [](const std::string& given, double v) {
    return v > 0 ? std::string() : given + " is not positive: expected a value above 0";
  });
}

inline CLI::Validator non_negative() {
  return number_check(">= 0", "non-negative", [](const std::string& given, double v) {
    return v < 0 ? given + " is negative: expected a value from 0 up" : std::string();
  });
}

// --strict: suspicious but valid input (core/warnings.h) stops the command instead of a warning.
inline void add_strict_flag(CLI::App* cmd) {
  cmd->add_flag_callback("--strict", [] { set_strict_warnings(true); },
                         "warnings about suspicious but valid input (label ids far above the rest, feature values "
                         "beyond any sane scale, a class with a single point, a checkpoint older than its run's "
                         "newest) are errors");
}

// --accept-unchecked-checkpoint: a checkpoint manifest without its own checksum (written by an older
// frugal, or edited by hand and its "manifest_checksum" removed) is loaded unchecked, not refused.
inline void add_accept_unchecked_flag(CLI::App* cmd, bool& target) {
  cmd->add_flag("--accept-unchecked-checkpoint", target,
                "load a checkpoint whose manifest.json has no checksum of its own (an older frugal's, or one "
                "edited by hand): by default it is refused");
}

// Every option of `app` and its subcommands whose type CLI11 names UINT (an unsigned integer, or a
// list or optional of them) refuses a value that starts with '-', naming the flag and the value
// ("--epochs: -1 is negative: expected a count from 0 up"), and one beyond 64 bits, which CLI11
// would saturate ("--seed: 99999999999999999999 is too large"). Call once, after every command is added.
inline void refuse_negative_unsigned(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("UINT", 0) != 0) continue;
    // CLI11's own PositiveNumber check on such a flag speaks in doubles ("Value 0 not in range
    // 0.000000 to 1797..."): it gives way to the same check in these words.
    bool positive = false;
    for (int i = 0;; ++i) {
      CLI::Validator* v = nullptr;
      try {
        v = option->get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      if ((v->get_description() == "POSITIVE" || v->get_name() == "positive") && v->get_active()) {
        v->active(false);
        positive = true;
      }
    }
    option->check(CLI::Validator(
        [positive](std::string& given) {
          const auto first = given.find_first_not_of(" \t");
          if (first != std::string::npos && given[first] == '-')
            return given + (positive ? " is negative: expected a count from 1 up" : " is negative: expected a count from 0 up");
          if (positive && given.find_first_not_of("0", first) == std::string::npos)
            return given + " is not positive: expected a count from 1 up";
          // Digits beyond 64 bits: CLI11 would saturate them silently.
          const auto last = given.find_last_not_of(" \t");
          if (first != std::string::npos && given.find_first_not_of("0123456789", first) > last) {
            uint64_t value = 0;
            const auto r = std::from_chars(given.data() + first, given.data() + last + 1, value);
            if (r.ec == std::errc::result_out_of_range)
              return given + " is too large: at most 18446744073709551615";
          }
          return std::string();
        },
        "", "non-negative"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_negative_unsigned(*sub);
}

// CLI11's message for a parse error in frugal's words where CLI11's own are obscure: a flag given
// twice ("--threads: At Most 1 required but received 2") says so ("--threads: given 2 times; give it
// once"). Other messages (an unknown flag, a value a check refused) are kept: they name the flag.
inline std::string parse_error_words(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string at_most = ": At Most 1 required but received ";
  if (const auto at = what.find(at_most); at != std::string::npos)
    return fmt::format("{}: given {} times; give it once", what.substr(0, at), what.substr(at + at_most.size()));
  return what;
}

// Option field -> the flag that fills it, e.g. {"SynthXmcOptions::features", "--features"}.
using FlagNames = std::vector<std::pair<std::string_view, std::string_view>>;

// Runs `body`; a frugal::Error whose message names a field of `names` is rethrown with the flags'
// names instead, after `prefix` (e.g. "synth-xmc: "). Other errors pass unchanged.
template <class F>
void with_flag_names(FlagNames names, std::string_view prefix, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    // Longest first: LshOptions::rebuild_first must not be taken for a shorter field it starts with.
    std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    std::string what = e.what();
    bool named = false;
    for (const auto& [field, flag] : names) {
      for (size_t at = what.find(field); at != std::string::npos; at = what.find(field, at + flag.size())) {
        what.replace(at, field.size(), flag);
        named = true;
      }
    }
    if (!named) throw;
    throw Error(std::string(prefix) + what);
  }
}

}  // namespace frugal::cli
