// Progress reporting for long loops: a live bar redrawn in place on a terminal, plain periodic
// lines (every ~10% or 30 s) when stderr is a file or a pipe, nothing when disabled.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace frugal {

class Progress {
 public:
  Progress(std::string label, size_t total, bool enabled = true);
  // done: items finished so far; loss: running mean loss to show.
  void update(size_t done, double loss);
  void finish(const std::string& summary);

 private:
  std::string label_;
  size_t total_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_;
  size_t last_decile_ = 0;
};

}  // namespace frugal
