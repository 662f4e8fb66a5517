#include "comm/slurm.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "comm/environment.h"
#include "core/check.h"
#include "core/parse.h"

namespace frugal::comm::slurm {
namespace {

constexpr std::string_view kHostlistExpected = "a Slurm host list, e.g. node[01-03,07],gpu5";
// A typo such as "node[1-100000000]" must fail, not allocate a hundred million names.
constexpr size_t kMaxHosts = 1 << 20;

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "01-03,07" -> 01 02 03 07 (the padding of each range's first number kept).
std::vector<std::string> expand_bracket(std::string_view source, std::string_view list, std::string_view body) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = body.find(',', start);
    const std::string_view item = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    const size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash), hi = dash == item.npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9)
      throw_bad_item(source, list, "range", item, kHostlistExpected);
    const long a = parse_number<long>(source, lo, kHostlistExpected), b = parse_number<long>(source, hi, kHostlistExpected);
    if (b < a || out.size() + static_cast<size_t>(b - a) + 1 > kMaxHosts)
      throw_bad_item(source, list, "range", item, kHostlistExpected);
    for (long v = a; v <= b; ++v) out.push_back(fmt::format("{:0{}}", v, lo.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One host name pattern (no top-level commas): every combination of its brackets.
void expand_name(std::string_view source, std::string_view list, std::string_view name,
                 std::vector<std::string>& out) {
  std::vector<std::string> partial = {""};
  size_t at = 0;
  while (at < name.size()) {
    const size_t open = name.find('[', at);
    const std::string_view text = name.substr(at, open == name.npos ? name.npos : open - at);
    if (text.find(']') != text.npos) throw_bad_item(source, list, "host", name, kHostlistExpected);
    for (auto& p : partial) p += text;
    if (open == name.npos) break;
    const size_t close = name.find(']', open);
    if (close == name.npos) throw_bad_item(source, list, "host", name, kHostlistExpected);
    const auto values = expand_bracket(source, list, name.substr(open + 1, close - open - 1));
    std::vector<std::string> next;
    for (const auto& p : partial) {
      for (const auto& v : values) next.push_back(p + v);
    }
    if (next.size() > kMaxHosts) throw_bad_item(source, list, "host", name, kHostlistExpected);
    partial = std::move(next);
    at = close + 1;
  }
  for (auto& p : partial) {
    if (p.empty()) throw_bad_item(source, list, "host", name, kHostlistExpected);
    out.push_back(std::move(p));
  }
}

std::optional<std::string> variable(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view source, std::string_view list) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (++depth > 1) throw_bad_value(source, list, kHostlistExpected);
    } else if (c == ']') {
      if (--depth < 0) throw_bad_value(source, list, kHostlistExpected);
    } else if (c == ',' && depth == 0) {
      const std::string_view name = list.substr(start, i - start);
      if (name.empty()) throw_bad_value(source, list, kHostlistExpected);
      expand_name(source, list, name, hosts);
      start = i + 1;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      throw_bad_value(source, list, kHostlistExpected);
    }
  }
  if (depth != 0) throw_bad_value(source, list, kHostlistExpected);
  return hosts;
}

std::vector<int> expand_tasks_per_node(std::string_view source, std::string_view text) {
  constexpr std::string_view expected = "task counts per node, e.g. 2(x3),1";
  std::vector<int> counts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == text.npos ? text.npos : comma - start);
    const size_t paren = item.find("(x");
    const std::string_view count = item.substr(0, paren);
    int repeat = 1;
    if (paren != item.npos) {
      if (!item.ends_with(")")) throw_bad_item(source, text, "item", item, expected);
      const std::string_view times = item.substr(paren + 2, item.size() - paren - 3);
      if (!all_digits(times)) throw_bad_item(source, text, "item", item, expected);
      repeat = parse_number<int>(source, times, expected);
    }
    if (!all_digits(count) || repeat < 1 || counts.size() + static_cast<size_t>(repeat) > kMaxHosts)
      throw_bad_item(source, text, "item", item, expected);
    counts.insert(counts.end(), static_cast<size_t>(repeat), parse_number<int>(source, count, expected));
    if (comma == text.npos) break;
    start = comma + 1;
  }
  return counts;
}

std::optional<Placement> from_environment() {
  const auto rank_text = variable(env::kSlurmProcId), size_text = variable(env::kSlurmNTasks);
  if (!rank_text || !size_text) return std::nullopt;
  Placement p;
  p.size = parse_number<int>(env::kSlurmNTasks, *size_text, "a task count, at least 1", [](int n) { return n >= 1; });
  p.rank = parse_number<int>(env::kSlurmProcId, *rank_text, "a task id, at least 0", [](int n) { return n >= 0; });
  FRUGAL_CHECK(p.rank < p.size, fmt::format("{} {} is not below {} {}", env::kSlurmProcId, p.rank,
                                            env::kSlurmNTasks, p.size));
  for (const std::string_view name : {env::kSlurmStepNodeList, env::kSlurmJobNodeList}) {
    if (const auto list = variable(name)) {
      p.first_host = expand_hostlist(name, *list).at(0);
      p.first_host_source = std::string(name);
      break;
    }
  }
  // The step's layout first: a step may use fewer tasks per node than the job was given.
  for (const std::string_view name : {env::kSlurmStepTasksPerNode, env::kSlurmTasksPerNode}) {
    const auto text = variable(name);
    if (!text) continue;
    const std::vector<int> counts = expand_tasks_per_node(name, *text);
    int node = 0;
    if (const auto id = variable(env::kSlurmNodeId))
      node = parse_number<int>(env::kSlurmNodeId, *id, "a node index, at least 0", [](int n) { return n >= 0; });
    FRUGAL_CHECK(static_cast<size_t>(node) < counts.size(),
                 fmt::format("{} {} is past the {} nodes of {} '{}'", env::kSlurmNodeId, node, counts.size(), name,
                             *text));
    if (counts[static_cast<size_t>(node)] >= 1) p.local_size = counts[static_cast<size_t>(node)];
    break;
  }
  if (!p.local_size) {
    if (const auto text = variable(env::kSlurmNTasksPerNode))
      p.local_size = parse_number<int>(env::kSlurmNTasksPerNode, *text, "a task count, at least 1",
                                       [](int n) { return n >= 1; });
  }
  return p;
}

}  // namespace frugal::comm::slurm
