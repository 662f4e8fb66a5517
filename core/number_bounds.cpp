#include "core/number_bounds.h"

#include <fmt/format.h>

namespace frugal {

std::string NumberBounds::range() const {
  return fmt::format("{}{}, {}{}", ends == Ends::open_below ? '(' : '[', lo, hi, ends == Ends::open_above ? ')' : ']');
}

std::string NumberBounds::name() const {
  switch (kind) {
    case Kind::positive: return "positive";
    case Kind::non_negative: return "non-negative";
    case Kind::range: return "range " + range();
    default: return "";
  }
}

std::string NumberBounds::description() const {
  switch (kind) {
    case Kind::positive: return "> 0";
    case Kind::non_negative: return ">= 0";
    case Kind::range: return ends == Ends::closed ? range() : "in " + range();
    default: return "";
  }
}

}  // namespace frugal
