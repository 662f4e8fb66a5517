#include "comm/run_config.h"

#include <fmt/format.h>

#include "core/crc32c.h"

namespace frugal::comm {
namespace {
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t text_hash(const std::string& s, uint32_t seed) {
  const auto b = std::as_bytes(std::span<const char>(s.data(), s.size()));
  return (static_cast<uint64_t>(crc32c(b, seed)) << 32) | crc32c(b, seed ^ 0x9e3779b9u);
}
}  // namespace

uint64_t config_hash(const RunConfig& config) {
  uint64_t h = 0;
  for (const auto& [k, v] : config) h += mix(text_hash(k, 1) ^ mix(text_hash(v, 2)));
  return h;
}

std::string config_difference(const RunConfig& a, int rank_a, const RunConfig& b, int rank_b) {
  // A setting both ranks have, with other values, first: it is the cause, and the settings only one
  // rank has follow from it (a --sampler lsh rank records its --logq, a --sampler exact one none).
  // Every one is named: one flag can change several recorded settings (--sampler exact also moves
  // the automatic lr), and the user needs to see the one they typed among them.
  std::string out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second == v) continue;
    if (out.empty())
      out = fmt::format("setting '{}' differs: rank {} has '{}', rank {} has '{}'", k, rank_a, v, rank_b, it->second);
    else
      out += fmt::format("; '{}' differs too: '{}' and '{}'", k, v, it->second);
  }
  if (!out.empty()) return out;
  for (const auto& [k, v] : a) {
    if (!b.count(k)) {
      return fmt::format("setting '{}' differs: rank {} has '{}', rank {} does not set it", k,
                         rank_a, v, rank_b);
    }
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) {
      return fmt::format("setting '{}' differs: rank {} does not set it, rank {} has '{}'", k,
                         rank_a, rank_b, v);
    }
  }
  return {};
}

}  // namespace frugal::comm
