#include "train/metrics_log.h"

#include <sys/resource.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/warnings.h"

namespace frugal::train {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (file_ == nullptr) throw Error(fmt::format("{}: cannot open the metrics file for writing", path));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (file_ == nullptr) return;
  // The warnings since the last record (core/warnings.h) come first, one {"event": "warning"} each.
  std::string line;
  for (const std::string& w : take_warnings()) line += nlohmann::json{{"event", "warning"}, {"message", w}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // Paths and headers are the user's bytes: invalid UTF-8 is replaced, not thrown about.
  line += record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw Error(fmt::format("{}: write failed", path_));
}

size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

std::string rank_metrics_path(const std::string& path, int rank) {
  if (path.empty() || rank == 0) return path;
  const std::string ext = ".jsonl";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return fmt::format("{}.rank{}{}", path.substr(0, path.size() - ext.size()), rank, ext);
  return fmt::format("{}.rank{}", path, rank);
}

}  // namespace frugal::train
