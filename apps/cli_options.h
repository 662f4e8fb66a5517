// What every subcommand does with its flags, in one place:
//  - add_choice: a flag whose value is one of a few names becomes the enum (or bool) the name
//    stands for, once, while CLI11 parses; nothing compares option strings afterwards. The names
//    are the library's own (to_string of the enum) unless given; help and errors are CLI11's
//    IsMember ones ("--format: bad not in {xmc,idx}").
//  - with_flag_names: the library names option fields in its errors ("SynthXmcOptions::features
//    must be > 0"), never flags; a command knows which flag fills which field and rethrows the
//    error naming the flag instead ("synth-xmc: --features must be > 0").
//  - check_numbers: every numeric flag is read as the value the program will hold, or refused
//    naming the flag (`--epochs -1` trained forever, `--warmup-steps -1` became 2^64-1, `--lr 1e39`
//    became inf); in_range / in_range_below / above_up_to / positive / non_negative add a flag's
//    own range.
// Numbers in flags are CLI11's; numbers in other text ("AxB", lists, variables) are core/parse.h's.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/flag_names.h"
#include "core/flag_number.h"
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

// Numbers in flags are read by core/flag_number.h (read_flag_number, the ranges' words), the one
// reading the run API's option table uses too.

// A validator from `error_of(given, value)` (empty: accepted) on `given` read as a T (the flag's
// type; the bounds' type when not named), after the reading itself is checked.
template <class T, class F>
CLI::Validator number_check(std::string description, std::string name, F error_of) {
  return CLI::Validator(
      [error_of](std::string& given) {
        std::string error;
        const std::optional<T> v = read_flag_number<T>(given, error);
        return v ? error_of(given, *v) : error;
      },
      std::move(description), std::move(name));
}

// The value, read as T (default: the bounds' type), within `bounds` (core/flag_number.h: the words,
// e.g. "--tables: 99999999999 is outside [1, 4096]"). The range is the validator's name too ("range
// [1, 4096]"): `frugal --list-flags` reports it (frugal_main.cpp).
template <class T>
CLI::Validator bounded(const NumberBounds& bounds) {
  return CLI::Validator([bounds](std::string& given) { return text_problem<T>(given, bounds); }, bounds.description(),
                        bounds.name());
}

template <class T = void, class B>
CLI::Validator interval(B lo, B hi, Ends ends) {
  using V = std::conditional_t<std::is_void_v<T>, B, T>;
  return bounded<V>({NumberBounds::Kind::range, static_cast<double>(lo), static_cast<double>(hi), ends});
}

// [lo, hi], e.g. in_range(1, 4096), in_range<float>(0.0, 0.99).
template <class T = void, class B>
CLI::Validator in_range(B lo, B hi) {
  return interval<T>(lo, hi, Ends::closed);
}

// [lo, hi): a share that must leave something (--test-fraction in [0, 1)).
template <class T = void, class B>
CLI::Validator in_range_below(B lo, B hi) {
  return interval<T>(lo, hi, Ends::open_above);
}

// (lo, hi]: a positive value with a plausible largest (--lr in (0, 1000]).
template <class T = void, class B>
CLI::Validator above_up_to(B lo, B hi) {
  return interval<T>(lo, hi, Ends::open_below);
}

// Any value a T holds (a count of fewer than 64 bits: check_numbers reads every count as 64 bits,
// and CLI11's own refusal of the rest says only "Could not convert").
template <class T>
CLI::Validator holds() {
  return number_check<T>("", fmt::format("range [{}, {}]", std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()),
                         [](const std::string&, T) { return std::string(); });
}

template <class T = double>
CLI::Validator positive() {
  return bounded<T>(NumberBounds::positive());
}

template <class T = double>
CLI::Validator non_negative() {
  return bounded<T>(NumberBounds::non_negative());
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

// The type a flag holds, from the name CLI11 gives it: UINT (an unsigned integer, or a list or
// optional of them), INT, FLOAT. CLI11 names float and double alike: FLOAT is read as a float, the
// type frugal computes in (no flag means a value beyond a float's range, or below its smallest normal
// magnitude, even where it keeps a double).
enum class FlagNumber { none, unsigned_integer, signed_integer, floating };

inline FlagNumber flag_number_of(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  if (type.rfind("UINT", 0) == 0) return FlagNumber::unsigned_integer;
  if (type.rfind("INT", 0) == 0) return FlagNumber::signed_integer;
  if (type.rfind("FLOAT", 0) == 0) return FlagNumber::floating;
  return FlagNumber::none;
}

// Every numeric option of `app` and its subcommands reads its text through read_flag_number (one
// place, every command): refused, naming the flag and the value, unless the value the program will
// hold is the one given ("--epochs: -1 is negative: expected a count from 0 up", "--seed:
// 99999999999999999999 is too large: at most 18446744073709551615", "--lr: 1e39 is too large: at
// most 3.40282e+38", "--threads: an empty value is not a number"); the text CLI11 converts is the
// canonical one ("010" is 10, not octal 8). Call once, after every command is added.
inline void check_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const FlagNumber kind = flag_number_of(*option);
    if (kind == FlagNumber::none) {
      // A text value given empty ("--out ''", "--train ''") reached the library as a path of no name
      // (": no such file", ": Invalid argument"): refused naming the flag. Not the words of a command
      // passed through (`launch -- CMD ARGS...`), which may be empty.
      const bool passed_through = option->get_positional() && option->get_items_expected_max() > 1;
      const std::string empty = option->get_required() ? "an empty value: give one"
                                                       : "an empty value: give one, or leave it out for its default";
      if (option->get_items_expected_max() != 0 && !passed_through)
        option->check(CLI::Validator([empty](std::string& given) { return given.empty() ? empty : std::string(); },
                                     "", "not-empty"));
      continue;
    }
    // CLI11's own PositiveNumber check on a count speaks in doubles ("Value 0 not in range 0.000000
    // to 1797..."), and frugal's positive() says "a value above 0": a count's check says "a count
    // from 1 up" instead.
    bool positive = false;
    if (kind == FlagNumber::unsigned_integer) {
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
    }
    option->check(CLI::Validator(
        [kind, positive](std::string& given) {
          std::string error, canonical;
          bool ok = false;
          switch (kind) {
            case FlagNumber::unsigned_integer: {
              const std::optional<uint64_t> v = read_flag_number<uint64_t>(given, error, &canonical);
              if (v && positive && *v == 0) return given + " is not positive: expected a count from 1 up";
              if (!v && positive && error.find("is negative") != std::string::npos)
                return given + " is negative: expected a count from 1 up";
              ok = v.has_value();
              break;
            }
            case FlagNumber::signed_integer: ok = read_flag_number<int64_t>(given, error, &canonical).has_value(); break;
            default: ok = read_flag_number<float>(given, error, &canonical).has_value(); break;
          }
          if (!ok) return error;
          given = canonical;  // what CLI11 converts
          return std::string();
        },
        "", "number"));
    // Last, so that the flag's own range speaks first about the text as given; and modifying (check()
    // makes a validator read-only, transform() would run it first), so that CLI11 converts the
    // canonical text.
    for (int i = 0;; ++i) {
      try {
        CLI::Validator* v = option->get_validator(i);
        if (v->get_name() == "number") v->non_modifying(false);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

// CLI11's message for a parse error in frugal's words where CLI11's own are obscure: a flag given
// twice ("--threads: At Most 1 required but received 2") says so ("--threads: given 2 times; give it
// once"), and a value its type cannot hold says that. Other messages (an unknown flag, a value a
// check refused) are kept: they name the flag.
inline std::string parse_error_words(const CLI::ParseError& e) {
  const std::string what = e.what();
  // What check_numbers let through but the flag's type cannot hold (a count of fewer than 64 bits,
  // --threads 2147483648): "Could not convert: --threads = 2147483648".
  const std::string convert = "Could not convert: ";
  if (const auto eq = what.find(" = "); what.rfind(convert, 0) == 0 && eq != std::string::npos)
    return fmt::format("{}: {} is beyond what this flag holds", what.substr(convert.size(), eq - convert.size()),
                       what.substr(eq + 3));
  const std::string at_most = ": At Most 1 required but received ";
  if (const auto at = what.find(at_most); at != std::string::npos)
    return fmt::format("{}: given {} times; give it once", what.substr(0, at), what.substr(at + at_most.size()));
  return what;
}

// with_flag_names (core/flag_names.h): a library error naming an option field names its flag instead.

}  // namespace frugal::cli
