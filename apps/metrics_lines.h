// Reading a `frugal train --metrics` file: one JSON object a line, for `frugal bench roofline` and
// `frugal plan`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace frugal::cli {

// Calls `each` with every non-empty line of `path`, parsed; a line that is not JSON, or a file that
// cannot be read, fails naming the file (and line).
void for_each_metrics_line(const std::string& path, const std::function<void(nlohmann::json&)>& each);
// The same with the line's number (from 1), for messages naming FILE:LINE.
void for_each_numbered_metrics_line(const std::string& path,
                                    const std::function<void(nlohmann::json&, size_t line)>& each);

}  // namespace frugal::cli
