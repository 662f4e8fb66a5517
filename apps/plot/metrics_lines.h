// Reading a `frugal train --metrics` file: one JSON object a line, for `frugal bench roofline` and
// `frugal plan`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace frugal::cli {

// Calls `each` with every non-empty line of `path`, parsed; a line that is not JSON, or a file that
// cannot be read, fails naming the file (and line).
void for_each_metrics_line(const std::string& path, const std::function<void(nlohmann::json&)>& each);
// The same with the line's number (from 1), for messages naming FILE:LINE.
void for_each_numbered_metrics_line(const std::string& path,
                                    const std::function<void(nlohmann::json&, size_t line)>& each);

// Rank 0's epoch lines of a metrics log ({"event": "epoch"}; a line with another "rank" is another
// rank's), in file order; every one has a whole "epoch" number (an epoch line without one fails
// naming FILE:LINE). Fields of other types are the caller's to test (is_number) before use.
std::vector<nlohmann::json> read_epoch_lines(const std::string& path);

}  // namespace frugal::cli
