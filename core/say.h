// The library's printf for its progress lines and notes (core/output.h says where they go):
//   say("epoch {}: loss {:.4f}\n", epoch, loss);      // a progress line (stdout)
//   say_notice("note: {} is ignored\n", flag);         // a note (stderr)
// Internal (fmt): not a public header.
#pragma once

#include <fmt/format.h>

#include "core/output.h"

namespace frugal {

template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  write_output(OutputStream::progress, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void say_notice(fmt::format_string<Args...> format, Args&&... args) {
  write_output(OutputStream::notice, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace frugal
