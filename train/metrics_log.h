// MetricsLog: the machine-readable record of a run, one JSON object per line (JSON Lines), flushed
// after every record so a crash loses nothing already logged. Warnings (core/warnings.h) raised
// since the previous record are written before each record as {"event": "warning", "message": ...}.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace frugal::train {

class MetricsLog {
 public:
  MetricsLog() = default;  // disabled: write() does nothing
  explicit MetricsLog(const std::string& path, bool append = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);
  bool enabled() const { return file_ != nullptr; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// The metrics file of a rank: rank 0 writes FILE.jsonl (`path` as given), rank r > 0
// FILE.rank<r>.jsonl (or PATH.rank<r> when `path` does not end in .jsonl). Empty stays empty.
std::string rank_metrics_path(const std::string& path, int rank);

// Peak resident set size of this process in bytes (getrusage).
size_t peak_rss_bytes();

}  // namespace frugal::train
