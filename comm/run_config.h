// The run's configuration as seen by one rank: setting name -> value. Ranks exchange it at
// rendezvous and refuse to start together when it differs, naming the first setting that differs
// (a model trained by ranks that disagree on, say, the hidden size or the seed is garbage).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace frugal::comm {

using RunConfig = std::map<std::string, std::string>;

// Order-independent hash of all (name, value) pairs; 0 for an empty configuration.
uint64_t config_hash(const RunConfig& config);

// Empty when equal; else e.g. "setting 'lr' differs: rank 0 has '0.001', rank 2 has '0.01'".
std::string config_difference(const RunConfig& a, int rank_a, const RunConfig& b, int rank_b);

}  // namespace frugal::comm
