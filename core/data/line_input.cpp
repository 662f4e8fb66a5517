#include "core/data/line_input.h"

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::data {

bool read_line(std::istream& in, std::string& line, size_t cap, const std::string& name, size_t line_no,
               std::string_view hint) {
  line.clear();
  char buf[1 << 16];
  while (true) {
    in.getline(buf, sizeof buf);
    const auto got = static_cast<size_t>(in.gcount());
    if (in.eof()) {
      line.append(buf, got);
      if (line.size() <= cap) return !line.empty() || got > 0;
    } else if (in.fail()) {
      if (in.bad() || got == 0) return false;
      line.append(buf, got);  // the buffer filled up before the newline
      in.clear(in.rdstate() & ~std::ios_base::failbit);
    } else {
      line.append(buf, got - 1);  // gcount counts the newline
      if (line.size() <= cap) return true;
    }
    if (line.size() > cap) throw Error(fmt::format("{}:{}: line longer than {} bytes: {}", name, line_no, cap, hint));
  }
}

}  // namespace frugal::data
