#include "core/parse.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

void throw_bad_value(std::string_view what, std::string_view text, std::string_view expected) {
  throw Error(fmt::format("{} '{}': expected {}", what, text, expected));
}

void throw_bad_item(std::string_view what, std::string_view text, std::string_view item, std::string_view bad,
                    std::string_view expected) {
  throw Error(fmt::format("{} '{}': bad {} '{}': expected {}", what, text, item, bad, expected));
}

}  // namespace frugal
