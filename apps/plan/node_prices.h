// `frugal plan --prices FILE`: a small, user-editable table of node types, so the planner can say
// what an epoch costs in dollars on N cheap CPU nodes next to one GPU node. One node type a line,
// '#' starts a comment:
//   NAME  CORES  MEMORY_GIB  LINK  USD_PER_HOUR  [SAMPLES_PER_S]
// LINK as --link takes it (100mbit, 1gbit, 10gbit, ...). SAMPLES_PER_S: a speed measured on that node
// (bench/gpu/run.sh's figure for a GPU node, say); a node type with one is priced as one node at that
// speed, the others from the cost model at every --nodes count. bench/plan/prices.example holds a
// 2-core VM, a 16-core VM and a one-GPU VM at example prices.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace frugal::cli {

struct NodeType {
  std::string name;
  double cores = 0, memory_gib = 0;
  std::string link;
  double usd_per_hour = 0;
  std::optional<double> samples_per_s;  // measured; nullopt: from the cost model
  int line = 0;                         // in the file, for messages
};

// Throws frugal::Error naming FILE:LINE and the field for a malformed line.
std::vector<NodeType> read_node_prices(const std::string& path);

}  // namespace frugal::cli
