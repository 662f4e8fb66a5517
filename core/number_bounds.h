// The values a numeric option accepts beyond what its type holds: positive, non-negative or a range
// with its ends (the run API's option table, train/run/train_options.h; the command line's
// validators). The words of a refusal are core/flag_number.h's.
#pragma once

#include <string>

namespace frugal {

// Which ends of a range belong to it: [lo, hi], [lo, hi) or (lo, hi].
enum class Ends { closed, open_above, open_below };

// The values an option accepts beyond what its type holds.
struct NumberBounds {
  enum class Kind { any, positive, non_negative, range };
  Kind kind = Kind::any;
  double lo = 0, hi = 0;
  Ends ends = Ends::closed;

  static NumberBounds positive() { return {Kind::positive}; }
  static NumberBounds non_negative() { return {Kind::non_negative}; }
  static NumberBounds in_range(double lo, double hi) { return {Kind::range, lo, hi, Ends::closed}; }
  static NumberBounds in_range_below(double lo, double hi) { return {Kind::range, lo, hi, Ends::open_above}; }
  static NumberBounds above_up_to(double lo, double hi) { return {Kind::range, lo, hi, Ends::open_below}; }

  // "[1, 4096]", "[0, 1)", "(0, 1000]".
  std::string range() const;
  // The check's name, which `frugal --list-flags` reports: "range [1, 4096]", "positive",
  // "non-negative", "" for none.
  std::string name() const;
  // What --help shows: "> 0", ">= 0", "[1, 4096]", "in [0, 1)".
  std::string description() const;
  template <class V>
  bool holds(V v) const {
    switch (kind) {
      case Kind::positive: return v > V{0};
      case Kind::non_negative: return !(v < V{0});
      case Kind::range: {
        const auto l = static_cast<V>(lo), h = static_cast<V>(hi);
        return (ends == Ends::open_below ? v > l : v >= l) && (ends == Ends::open_above ? v < h : v <= h);
      }
      default: return true;
    }
  }
};

}  // namespace frugal
