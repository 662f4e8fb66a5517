// Reading text data line by line without trusting the input: std::getline has no bound, so a file
// with no newline would be read whole into one string. read_line reads one line in chunks and
// refuses it past a cap, naming file:line. The XMC and Criteo readers share it.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <string_view>

namespace frugal::data {

// Reads one line (without its '\n') into `line`; false at the end of the stream (or on a read
// error: check in.bad()). A line longer than `cap` bytes throws frugal::Error
// "{name}:{line_no}: line longer than {cap} bytes: {hint}".
bool read_line(std::istream& in, std::string& line, size_t cap, const std::string& name, size_t line_no,
               std::string_view hint);

}  // namespace frugal::data
