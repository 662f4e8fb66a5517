// How the option tables (train/run/train_options.cpp, predict_session.cpp) declare an option: a
// number within bounds, one of a few names, a switch, text, or an option of a nested part of the
// config. Each makes the Option's reading, check, text and C++-value check from one member pointer.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/device.h"
#include "core/flag_number.h"
#include "train/run/train_options.h"

namespace frugal::run::options {

template <class C>
Option<C> declared(std::string flag, std::string help, OptionType type) {
  Option<C> o;
  o.flag = std::move(flag);
  o.help = std::move(help);
  o.type = type;
  return o;
}

template <class T>
struct Unwrapped {
  using type = T;
  static constexpr bool optional = false;
};
template <class T>
struct Unwrapped<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};

template <class T>
constexpr OptionType number_type() {
  if constexpr (std::is_unsigned_v<T>) return OptionType::count;
  else if constexpr (std::is_integral_v<T>) return OptionType::integer;
  else return OptionType::real;
}

// A number option on `member` (a T or an optional T, unset by default): read by read_flag_number,
// within `bounds`. A C++ caller's value is checked unless it is the default (0 may mean "unset").
// `shown`: for an optional one the run resolves, the word that stands for its unset state ("auto"):
// --help shows it as the default, and it is accepted as a value.
template <class C, class M>
Option<C> number(std::string flag, M C::*member, std::string help, NumberBounds bounds = {}, std::string shown = {}) {
  using T = typename Unwrapped<M>::type;
  constexpr bool optional = Unwrapped<M>::optional;
  Option<C> o = declared<C>(std::move(flag), std::move(help), number_type<T>());
  o.bounds = bounds;
  o.check_text = [bounds, shown](const std::string& text) {
    if (optional && !shown.empty() && text == shown) return std::string();
    return text_problem<T>(text, bounds);
  };
  o.store = [member, shown](C& c, const std::string& text) {
    if constexpr (optional) {
      if (!shown.empty() && text == shown) {
        c.*member = std::nullopt;
        return;
      }
    }
    std::string error;
    c.*member = *read_flag_number<T>(text, error);
  };
  o.text = [member, shown](const C& c) -> std::string {
    if constexpr (optional) return c.*member ? fmt::format("{}", *(c.*member)) : shown;
    else return fmt::format("{}", c.*member);
  };
  o.problem = [member, bounds](const C& c) -> std::string {
    const M& value = c.*member;
    if (value == C{}.*member) return "";
    if constexpr (optional) return value_problem(fmt::format("{}", *value), *value, bounds);
    else return value_problem(fmt::format("{}", value), value, bounds);
  };
  o.default_text = o.text(C{});
  return o;
}

// One of `names`, each standing for a value of `member`; `shown`: the default --help shows when the
// field's own default is unset (an option the run resolves, whose unset state means that value).
template <class C, class M>
Option<C> choice(std::string flag, M C::*member, std::vector<std::pair<std::string, M>> names, std::string help,
                 std::string shown = "") {
  Option<C> o = declared<C>(std::move(flag), std::move(help), OptionType::choice);
  for (const auto& [name, value] : names) o.choices.push_back(name);
  o.check_text = [choices = o.choices](const std::string& text) {
    return std::find(choices.begin(), choices.end(), text) != choices.end()
               ? std::string()
               : fmt::format("{} not in {{{}}}", text, fmt::join(choices, ","));
  };
  o.store = [member, names](C& c, const std::string& text) {
    for (const auto& [name, value] : names)
      if (name == text) c.*member = value;
  };
  o.text = [member, names](const C& c) {
    for (const auto& [name, value] : names)
      if (value == c.*member) return name;
    return std::string();
  };
  o.problem = [](const C&) { return std::string(); };  // a C++ caller's enum is one of them
  o.default_text = shown.empty() ? o.text(C{}) : shown;
  return o;
}

// The same with the library's names of `values` (to_string).
template <class C, class E>
Option<C> choice(std::string flag, E C::*member, std::initializer_list<E> values, std::string help) {
  std::vector<std::pair<std::string, E>> names;
  for (const E v : values) names.emplace_back(std::string(to_string(v)), v);
  return choice(std::move(flag), member, std::move(names), std::move(help));
}

template <class C>
Option<C> on_off(std::string flag, bool C::*member, std::string help) {
  return choice<C, bool>(std::move(flag), member, {{"on", true}, {"off", false}}, std::move(help));
}

template <class C>
Option<C> on_off(std::string flag, std::optional<bool> C::*member, std::string help, std::string shown) {
  return choice<C, std::optional<bool>>(std::move(flag), member, {{"on", true}, {"off", false}}, std::move(help),
                                        std::move(shown));
}

// A switch: given, the field is true.
template <class C>
Option<C> switch_option(std::string flag, bool C::*member, std::string help) {
  Option<C> o = declared<C>(std::move(flag), std::move(help), OptionType::switch_);
  o.check_text = [](const std::string& text) {
    return text == "on" || text == "off" ? std::string() : fmt::format("{} not in {{on,off}}", text);
  };
  o.store = [member](C& c, const std::string& text) { c.*member = text == "on"; };
  o.text = [member](const C& c) { return std::string(c.*member ? "on" : "off"); };
  o.problem = [](const C&) { return std::string(); };
  return o;
}

// Text (a path, a list the run reads): never empty, which named no file (": no such file").
template <class C>
Option<C> text_option(std::string flag, std::string C::*member, std::string help, bool required = false) {
  Option<C> o = declared<C>(std::move(flag), std::move(help), OptionType::text);
  o.required = required;
  const std::string empty =
      required ? "an empty value: give one" : "an empty value: give one, or leave it out for its default";
  o.check_text = [empty](const std::string& text) { return text.empty() ? empty : std::string(); };
  o.store = [member](C& c, const std::string& text) { c.*member = text; };
  o.text = [member](const C& c) { return c.*member; };
  o.problem = [](const C&) { return std::string(); };
  o.default_text = C{}.*member;
  return o;
}

// `option` on the `member` part of an outer config (TrainConfig::infer, TrainConfig::dlrm).
template <class Outer, class Inner>
Option<Outer> nested(const Option<Inner>& in, Inner Outer::*member) {
  Option<Outer> o;
  static_cast<OptionSpec&>(o) = in;
  o.store = [store = in.store, member](Outer& c, const std::string& text) { store(c.*member, text); };
  o.text = [text = in.text, member](const Outer& c) { return text(c.*member); };
  o.problem = [problem = in.problem, member](const Outer& c) { return problem(c.*member); };
  return o;
}

// --device: cpu, cuda, cuda:N, auto or emulated (core/device.h); whether that device exists is
// found out when the run places its model.
template <class C>
Option<C> device_option(std::string C::*member) {
  Option<C> o = text_option("--device", member,
                            "compute device: cpu, cuda, cuda:N, or auto (cuda when a CUDA backend is available, else "
                            "cpu); emulated: a device for testing (host memory the host may not touch, every byte "
                            "crossing counted; kernels/emulated_backend.h)");
  o.check_text = [](const std::string& text) {
    return is_device_spec(text) ? std::string() : "'" + text + "' is not one of cpu, cuda, cuda:N, auto, emulated";
  };
  o.accepts = "cpu|cuda|cuda:N|auto|emulated";
  o.problem = [member, check = o.check_text](const C& c) { return check(c.*member); };
  return o;
}

// --threads: compute threads (0: the cores, shared among this host's ranks: train/run/rank_threads.h).
template <class C>
Option<C> threads_option(int C::*member) {
  return number("--threads", member, "compute threads (0: all cores, divided among the ranks frugal launch or mpirun "
                                     "starts on this host)");
}

// --accept-unchecked-checkpoint: a manifest without its own checksum is loaded, not refused.
template <class C>
Option<C> accept_unchecked_option(bool C::*member) {
  return switch_option("--accept-unchecked-checkpoint", member,
                       "load a checkpoint whose manifest.json has no checksum of its own (an older frugal's, or one "
                       "edited by hand): by default it is refused");
}

}  // namespace frugal::run::options
