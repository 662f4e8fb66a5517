#include "apps/plan/node_prices.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"
#include "core/regular_file.h"

namespace frugal::cli {

std::vector<NodeType> read_node_prices(const std::string& path) {
  std::ifstream in = open_regular_file(
      path, "a price table (NAME CORES MEMORY_GIB LINK USD_PER_HOUR [SAMPLES_PER_S] a line)", std::ios::in);
  std::vector<NodeType> out;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (const auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream fields(text);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    const auto where = [&](const std::string& what) { return fmt::format("{}:{}: {}", path, line, what); };
    FRUGAL_CHECK(f.size() == 5 || f.size() == 6,
                 where(fmt::format("{} fields; expected NAME CORES MEMORY_GIB LINK USD_PER_HOUR [SAMPLES_PER_S]", f.size())));
    const auto number = [&](size_t i, const char* field, bool positive) {
      char* end = nullptr;
      const double v = std::strtod(f[i].c_str(), &end);
      FRUGAL_CHECK(end != f[i].c_str() && *end == '\0' && std::isfinite(v) && (positive ? v > 0 : v >= 0),
                   where(fmt::format("{} '{}' is not a {} number", field, f[i], positive ? "positive" : "non-negative")));
      return v;
    };
    NodeType n{.name = f[0], .cores = number(1, "CORES", true), .memory_gib = number(2, "MEMORY_GIB", true),
               .link = f[3], .usd_per_hour = number(4, "USD_PER_HOUR", false), .samples_per_s = std::nullopt,
               .line = line};
    if (f.size() == 6) n.samples_per_s = number(5, "SAMPLES_PER_S", true);
    for (const NodeType& o : out)
      FRUGAL_CHECK(o.name != n.name, where(fmt::format("node type '{}' is also on line {}", n.name, o.line)));
    out.push_back(n);
  }
  FRUGAL_CHECK(!out.empty(), fmt::format("{}: no node types (NAME CORES MEMORY_GIB LINK USD_PER_HOUR a line)", path));
  return out;
}

}  // namespace frugal::cli
