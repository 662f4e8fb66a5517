// A number in an option's text, read as the value the program will hold, and the range an option
// declares for it: the one reading and the one set of words for every face (the command line's
// validators, apps/cli_options.h; the run API's option table, train/run/train_options.h; Python's
// keywords through it). Errors say the value, what is wrong and what is expected; the face puts
// the option's name in front ("--tables: 0 is outside [1, 4096]").
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "core/number_bounds.h"

namespace frugal {

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


// What is wrong with `value` (given as `given`) under `bounds`, or "" when nothing is. A count (an
// unsigned T) that must be positive says "a count from 1 up".
template <class T>
std::string value_problem(const std::string& given, T value, const NumberBounds& bounds) {
  using Kind = NumberBounds::Kind;
  if (bounds.holds(value)) return "";
  switch (bounds.kind) {
    case Kind::positive:
      return std::is_unsigned_v<T> ? given + " is not positive: expected a count from 1 up"
                                   : given + " is not positive: expected a value above 0";
    case Kind::non_negative: return given + " is negative: expected a value from 0 up";
    default: return fmt::format("{} is outside {}", given, bounds.range());
  }
}

// What is wrong with the text `given` read as a T under `bounds`, or "". A number beyond T's own
// range is outside a declared range too, in those words ("99999999999 is outside [1, 4096]").
template <class T>
std::string text_problem(const std::string& given, const NumberBounds& bounds) {
  std::string error;
  // A range (or a sign) speaks of the value as a number first: "-5 is negative: expected a value
  // from 0 up" rather than a count's words.
  if (bounds.kind == NumberBounds::Kind::range || bounds.kind == NumberBounds::Kind::non_negative) {
    const std::optional<double> wide = read_flag_number<double>(given, error);
    if (!wide) return error;
    if (!bounds.holds(*wide)) return value_problem(given, *wide, bounds);
  }
  const std::optional<T> v = read_flag_number<T>(given, error);
  if (!v) {
    if (std::is_unsigned_v<T> && bounds.kind == NumberBounds::Kind::positive && error.find("is negative") != std::string::npos)
      return given + " is negative: expected a count from 1 up";
    return error;
  }
  return value_problem(given, *v, bounds);
}

}  // namespace frugal
