// Values from text that no flag parser has seen: environment variables (FRUGAL_SIZE=4), "AxB"
// values (--grid 2x2) and comma lists (--layers 1024,512). Flags themselves are CLI11's job; this
// is the one other way frugal reads a number. The text must be the value and nothing else (leading
// blanks and a '+' are skipped, as std::stoi and std::stod did; no '-' for unsigned types), and
// every error names where the text came from (a flag, a variable or an option field), the bad text
// and what was expected, in one style:
//   FRUGAL_SIZE 'four': expected an integer
//   --grid '2by2': expected DxM, e.g. 2x2
//   --layers '1024,x': bad width 'x': expected positive integers separated by commas, e.g. 1024,1024
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace frugal {

// Throws frugal::Error("{what} '{text}': expected {expected}").
[[noreturn]] void throw_bad_value(std::string_view what, std::string_view text, std::string_view expected);
// Throws frugal::Error("{what} '{text}': bad {item} '{bad}': expected {expected}").
[[noreturn]] void throw_bad_item(std::string_view what, std::string_view text, std::string_view item,
                                 std::string_view bad, std::string_view expected);

// The number that is all of `text` (after leading blanks and a '+'), or nullopt.
template <class T>
std::optional<T> to_number(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// `text` as a T that `valid` (when given) accepts; else throws naming `what`, `text` and `expected`.
template <class T>
T parse_number(std::string_view what, std::string_view text, std::string_view expected,
               bool (*valid)(T) = nullptr) {
  const std::optional<T> v = to_number<T>(text);
  if (!v || (valid != nullptr && !valid(*v))) throw_bad_value(what, text, expected);
  return *v;
}

// "AxB" (separator `sep`): two T that `valid` accepts, e.g. --grid 2x2.
template <class T>
std::pair<T, T> parse_pair(std::string_view what, std::string_view text, char sep, std::string_view expected,
                           bool (*valid)(T) = nullptr) {
  const size_t at = text.find(sep);
  const std::optional<T> a = to_number<T>(text.substr(0, at));
  const std::optional<T> b = at == std::string_view::npos ? std::nullopt : to_number<T>(text.substr(at + 1));
  if (!a || !b || (valid != nullptr && (!valid(*a) || !valid(*b)))) throw_bad_value(what, text, expected);
  return {*a, *b};
}

// "a,b,c": every item a T that `valid` accepts; a bad one fails as
// "{what} '{text}': bad {item} '{x}': expected {expected}".
template <class T>
std::vector<T> parse_list(std::string_view what, std::string_view text, std::string_view item,
                          std::string_view expected, bool (*valid)(T) = nullptr) {
  std::vector<T> out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view one = rest.substr(0, comma);
    const std::optional<T> v = to_number<T>(one);
    if (!v || (valid != nullptr && !valid(*v))) throw_bad_item(what, text, item, one, expected);
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace frugal
