#include "core/host_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "core/regular_file.h"

namespace frugal {
namespace {

std::optional<uint64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  return n;
}

// A kernel file's text, or nothing when it cannot be read (no cgroup, no /proc).
std::string read_text(const std::string& path) {
  std::ifstream in;
  try {
    in = open_regular_file(path, "a kernel file", std::ios::in);
  } catch (const Error&) {
    return {};
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The process's cgroup v2 folder under /sys/fs/cgroup ("0::/PATH" in /proc/self/cgroup).
std::string cgroup_folder() {
  const std::string text = read_text("/proc/self/cgroup");
  const size_t at = text.find("0::");
  if (at == std::string::npos) return {};
  const size_t end = text.find('\n', at);
  return "/sys/fs/cgroup" + text.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
}

}  // namespace

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  const size_t at = meminfo.find(key);
  if (at == std::string_view::npos || (at > 0 && meminfo[at - 1] != '\n')) return std::nullopt;
  std::string_view rest = meminfo.substr(at + key.size());
  rest = rest.substr(0, rest.find('\n'));
  const std::optional<uint64_t> kib = parse_number(rest);
  if (!kib || rest.find("kB") == std::string_view::npos || *kib > (UINT64_MAX >> 10)) return std::nullopt;
  return *kib << 10;
}

std::optional<uint64_t> cgroup_room(std::string_view memory_max, std::string_view memory_current) {
  const std::optional<uint64_t> limit = parse_number(memory_max), used = parse_number(memory_current);
  if (!limit || !used) return std::nullopt;  // "max": no limit
  return *limit > *used ? *limit - *used : 0;
}

std::optional<uint64_t> host_memory_available() {
  std::optional<uint64_t> room = parse_mem_available(read_text("/proc/meminfo"));
  const std::string folder = cgroup_folder();
  if (!folder.empty()) {
    const std::optional<uint64_t> cgroup = cgroup_room(read_text(folder + "/memory.max"),
                                                       read_text(folder + "/memory.current"));
    if (cgroup) room = room ? std::min(*room, *cgroup) : *cgroup;
  }
  return room;
}

}  // namespace frugal
