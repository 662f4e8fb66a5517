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

// Numbers in flags are checked on the value the program will use (issue 62). CLI11 reads a float
// flag through long double and casts it (1e39 became inf, 1e-50 became 0), saturates a 64-bit
// integer (2^64 became 2^63-1), wraps a negative unsigned one, reads "010" as octal 8 and "0x10" as
// 16, and keeps the default for an empty value. read_flag_number<T> is the one reading of a flag's
// text as the T the program holds: decimal only, finite, within T's range, and for a floating T not
// so small that it would be 0 (or lose its precision) there. A whole number written "1e6" or "2.0"
// is a count; "2.5" is not. Errors say the value, what is wrong and what is expected, e.g.
// "1e39 is too large: at most 3.40282e+38"; CLI11 puts the flag in front ("--lr: 1e39 ...").
namespace number_detail {

inline std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `text` as a double (std::from_chars: decimal, no hex, no octal); nullopt with `error` set when it
// is not a finite number within a double.
inline std::optional<double> read_double(const std::string& given, std::string_view text, std::string& error) {
  if (text.empty()) {
    error = given.empty() ? "an empty value is not a number" : "'" + given + "' is not a number";
    return std::nullopt;
  }
  if (text.front() == '+') text.remove_prefix(1);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ptr != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    error = given + " is not a number";
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range) {  // beyond a double either way: strtod says which
    const double far = std::strtod(std::string(text).c_str(), nullptr);
    error = std::abs(far) >= 1.0 ? fmt::format("{} is too large: at most {:g}", given, std::numeric_limits<double>::max())
                                 : fmt::format("{} is too small: expected 0 or a magnitude of at least {:g}", given,
                                               std::numeric_limits<double>::min());
    return std::nullopt;
  }
  if (!std::isfinite(v)) {
    error = given + " is not a finite number";
    return std::nullopt;
  }
  return v;
}

}  // namespace number_detail

// `given` as the T a flag holds, or nullopt with `error` set. `canonical`, when given, receives the
// text CLI11 is to convert (an integer in plain decimal digits: "1e3" -> "1000", "010" -> "10").
template <class T>
std::optional<T> read_flag_number(const std::string& given, std::string& error, std::string* canonical = nullptr) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "a flag number is an integer or a float");
  using Limits = std::numeric_limits<T>;
  std::string_view text = number_detail::trimmed(given);
  if constexpr (std::is_integral_v<T>) {
    std::string_view digits = text;
    bool negative = !digits.empty() && digits.front() == '-';
    if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
    const bool plain = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
    const bool zero = plain && digits.find_first_not_of('0') == std::string_view::npos;
    if (negative && std::is_unsigned_v<T>) {
      if (!zero) {  // any negative count but -0 would wrap
        error = given + " is negative: expected a count from 0 up";
        return std::nullopt;
      }
      negative = false;
    }
    T value{};
    if (plain) {
      // Exact, however many digits: std::from_chars says when they do not fit.
      const std::string signed_digits = (negative ? "-" : "") + std::string(digits);
      const auto [ptr, ec] = std::from_chars(signed_digits.data(), signed_digits.data() + signed_digits.size(), value);
      if (ec != std::errc() || ptr != signed_digits.data() + signed_digits.size()) {
        error = negative ? fmt::format("{} is too small: at least {}", given, Limits::min())
                         : fmt::format("{} is too large: at most {}", given, Limits::max());
        return std::nullopt;
      }
    } else {
      const std::optional<double> v = number_detail::read_double(given, text, error);
      if (!v) return std::nullopt;
      if (*v != std::floor(*v)) {
        error = given + " is not a whole number";
        return std::nullopt;
      }
      // 2^64 and 2^63 are exact doubles: a value at or beyond them does not fit.
      if (*v >= std::ldexp(1.0, Limits::digits)) {
        error = fmt::format("{} is too large: at most {}", given, Limits::max());
        return std::nullopt;
      }
      if (*v < static_cast<double>(Limits::min())) {
        error = std::is_unsigned_v<T> ? given + " is negative: expected a count from 0 up"
                                      : fmt::format("{} is too small: at least {}", given, Limits::min());
        return std::nullopt;
      }
      value = static_cast<T>(*v);
    }
    if (canonical != nullptr) *canonical = fmt::format("{}", value);
    return value;
  } else {
    const std::optional<double> v = number_detail::read_double(given, text, error);
    if (!v) return std::nullopt;
    if (std::abs(*v) > static_cast<double>(Limits::max())) {
      error = fmt::format("{} is too large: at most {:g}", given, static_cast<double>(Limits::max()));
      return std::nullopt;
    }
    if (*v != 0.0 && std::abs(*v) < static_cast<double>(Limits::min())) {
      error = fmt::format("{} is too small: expected 0 or a magnitude of at least {:g}", given,
                          static_cast<double>(Limits::min()));
      return std::nullopt;
    }
    if (canonical != nullptr) *canonical = std::string(text.front() == '+' ? text.substr(1) : text);
    return static_cast<T>(*v);
  }
}

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

// Which ends of a range belong to it: [lo, hi], [lo, hi) or (lo, hi].
enum class Ends { closed, open_above, open_below };

// The value, read as T (default: the bounds' type), within the range from `lo` to `hi`. A number
// beyond T's own range is outside the range too, in those words ("--tables: 99999999999 is outside
// [1, 4096]"). The range is the validator's name too ("range [1, 4096]"): `frugal --list-flags`
// reports it (frugal_main.cpp).
template <class T = void, class B>
CLI::Validator interval(B lo, B hi, Ends ends) {
  using V = std::conditional_t<std::is_void_v<T>, B, T>;
  const std::string range = fmt::format("{}{}, {}{}", ends == Ends::open_below ? '(' : '[', lo, hi,
                                        ends == Ends::open_above ? ')' : ']');
  const auto inside = [ends](auto v, auto l, auto h) {
    return (ends == Ends::open_below ? v > l : v >= l) && (ends == Ends::open_above ? v < h : v <= h);
  };
  return CLI::Validator(
      [lo, hi, range, inside](std::string& given) {
        std::string error;
        const std::optional<double> wide = read_flag_number<double>(given, error);
        if (!wide) return error;
        const std::string outside = fmt::format("{} is outside {}", given, range);
        if (!inside(*wide, static_cast<double>(lo), static_cast<double>(hi))) return outside;
        const std::optional<V> v = read_flag_number<V>(given, error);
        if (!v) return error;
        return inside(*v, static_cast<V>(lo), static_cast<V>(hi)) ? std::string() : outside;
      },
      // A half-open range reads "in [0, 1)" in --help, as --dp-keep-input's "in (0, 1]" does.
      ends == Ends::closed ? range : "in " + range, "range " + range);
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
  return number_check<T>("> 0", "positive", [](const std::string& given, T v) {
    return v > 0 ? std::string() : given + " is not positive: expected a value above 0";
  });
}

template <class T = double>
CLI::Validator non_negative() {
  return number_check<T>(">= 0", "non-negative", [](const std::string& given, T v) {
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

// The name this check had before it covered every number (train/cmd_train.cpp's in-process parser calls it).
inline void refuse_negative_unsigned(CLI::App& app) { check_numbers(app); }

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
