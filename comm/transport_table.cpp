#include "comm/transport_table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/regular_file.h"
#include "core/sealed_json.h"

namespace frugal::comm {

Transport TransportTable::best(OpRoute route, uint64_t bytes) const {
  const auto& t = by_kind[static_cast<size_t>(route)];
  if (t.empty()) return Transport::mpi;
  const TransportTiming* nearest = &t.front();
  const double at = std::log(static_cast<double>(std::max<uint64_t>(bytes, 1)));
  for (const TransportTiming& p : t)
    if (std::abs(std::log(static_cast<double>(std::max<uint64_t>(p.bytes, 1))) - at) <
        std::abs(std::log(static_cast<double>(std::max<uint64_t>(nearest->bytes, 1))) - at))
      nearest = &p;
  return nearest->zmq_seconds < nearest->mpi_seconds ? Transport::zmq : Transport::mpi;
}

TransportMap TransportTable::per_kind() const {
  TransportMap map;
  for (size_t k = 0; k < kOpRoutes; ++k) {
    int zmq_wins = 0;
    for (const TransportTiming& p : by_kind[k]) zmq_wins += p.zmq_seconds < p.mpi_seconds ? 1 : -1;
    map.route[k] = zmq_wins > 0 ? Transport::zmq : Transport::mpi;
  }
  return map;
}

std::string TransportTable::to_json() const {
  nlohmann::ordered_json j;
  j["ranks"] = ranks;
  for (size_t k = 0; k < kOpRoutes; ++k) {
    if (by_kind[k].empty()) continue;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const TransportTiming& p : by_kind[k])
      rows.push_back({{"bytes", p.bytes}, {"mpi_seconds", p.mpi_seconds}, {"zmq_seconds", p.zmq_seconds}});
    j["kinds"][std::string(to_string(static_cast<OpRoute>(k)))] = rows;
  }
  return j.dump(1);
}

uint32_t TransportTable::digest() const {
  const std::string text = to_json();
  return crc32c(std::as_bytes(std::span(text.data(), text.size())));
}

TransportTable load_transport_table(const std::string& path) {
  FRUGAL_CHECK(std::filesystem::exists(path), fmt::format("{}: no transport table there: measure one with `mpirun -np N "
                                                          "frugal bench comm --out {} --tune`", path, path));
  const std::string text = read_regular_file(path, "a transport table of `frugal bench comm --tune`", 1 << 20);
  TransportTable t;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    // Numbers are checked as what they are read into (nlohmann converts a float or a huge value to
    // an int with undefined behaviour, found by tests/fuzz/fuzz_transport_table.cpp).
    const nlohmann::json& ranks = j.at("ranks");
    FRUGAL_CHECK(ranks.is_number_integer() && ranks.get<int64_t>() >= 1 && ranks.get<int64_t>() <= (int64_t{1} << 20),
                 fmt::format("{}: ranks must be a whole number from 1 to 2^20, found {}", path, ranks.dump()));
    t.ranks = static_cast<int>(ranks.get<int64_t>());
    FRUGAL_CHECK(j.at("kinds").is_object(), fmt::format("{}: kinds must be an object of kinds", path));
    for (const auto& [kind, rows] : j.at("kinds").items()) {
      size_t k = kOpRoutes;
      for (size_t i = 0; i < kOpRoutes; ++i)
        if (kind == to_string(static_cast<OpRoute>(i))) k = i;
      FRUGAL_CHECK(k < kOpRoutes, fmt::format("{}: unknown kind '{}'", path, kind));
      FRUGAL_CHECK(rows.is_array(), fmt::format("{}: {} must be a list of timings", path, kind));
      for (const auto& r : rows) {
        FRUGAL_CHECK(r.is_object() && r.at("bytes").is_number_unsigned() && r.at("mpi_seconds").is_number() &&
                         r.at("zmq_seconds").is_number(),
                     fmt::format("{}: {}: a timing is {{\"bytes\": whole number, \"mpi_seconds\": number, "
                                 "\"zmq_seconds\": number}}, found {}", path, kind, r.dump().substr(0, 200)));
        TransportTiming p{.bytes = r.at("bytes").get<uint64_t>(), .mpi_seconds = r.at("mpi_seconds").get<double>(),
                          .zmq_seconds = r.at("zmq_seconds").get<double>()};
        FRUGAL_CHECK(std::isfinite(p.mpi_seconds) && std::isfinite(p.zmq_seconds) && p.mpi_seconds >= 0 &&
                         p.zmq_seconds >= 0,
                     fmt::format("{}: {} at {} bytes: timings must be non-negative seconds", path, kind, p.bytes));
        t.by_kind[k].push_back(p);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not a transport table of `frugal bench comm --tune` ({})", path, json_error_words(e)));
  }
  for (auto& timings : t.by_kind)  // ascending bytes, as best() reads them (a hand-edited table may not be)
    std::stable_sort(timings.begin(), timings.end(),
                     [](const TransportTiming& a, const TransportTiming& b) { return a.bytes < b.bytes; });
  return t;
}

std::string default_transport_table_path() {
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.frugal/transport-table.json", home != nullptr && *home != '\0' ? home : ".");
}

}  // namespace frugal::comm
