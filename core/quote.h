// quote_input: a piece of untrusted input as error messages quote it. A bad token can be megabytes
// long (a file without newlines, binary data); messages show at most `max` bytes of it and say how
// long it was: 'abc' or 'abcdef...'... (10485760 bytes).
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace frugal {

inline std::string quote_input(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return fmt::format("'{}'", text);
  return fmt::format("'{}'... ({} bytes)", text.substr(0, max), text.size());
}

}  // namespace frugal
