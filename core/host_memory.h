// How much more host memory this process may use: what `--slice-weights auto` caps a rank's share
// of the model by (train/rebalance.h). The smaller of the kernel's MemAvailable estimate
// (/proc/meminfo: free memory plus what caches would give back) and what the process's cgroup
// v2 limit leaves (memory.max - memory.current), since a container's limit is reached long before
// the machine runs out.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace frugal {

// MemAvailable of a /proc/meminfo text, in bytes; nullopt when the line is missing or malformed.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);
// memory.max - memory.current of a cgroup v2 folder's two files' texts; nullopt when the limit is
// "max" (none) or a text is malformed; 0 when the group is at or over its limit.
std::optional<uint64_t> cgroup_room(std::string_view memory_max, std::string_view memory_current);

// The host memory this process may still take (the smaller of the two above that exist); nullopt
// where neither can be read (not Linux).
std::optional<uint64_t> host_memory_available();

}  // namespace frugal
