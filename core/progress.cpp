#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "core/say.h"

namespace frugal {

Progress::Progress(std::string label, size_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) == 1 && !output_redirected()),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::update(size_t done, double loss) {
  if (!enabled_ || total_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? done / secs : 0.0;
  const double frac = static_cast<double>(done) / total_;
  if (tty_) {
    if (now - last_ < std::chrono::milliseconds(100) && done < total_) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    say_notice("\r{} [{}{}] {:5.1f}% {:8.0f}/s loss {:.4f} ", label_, std::string(filled, '#'),
               std::string(kWidth - filled, '.'), 100.0 * frac, rate, loss);
    std::fflush(stderr);
    return;
  }
  const size_t decile = static_cast<size_t>(frac * 10);
  if (decile > last_decile_ || now - last_ > std::chrono::seconds(30)) {
    last_decile_ = decile;
    last_ = now;
    say_notice("{} {:5.1f}% ({}/{}) {:.0f} samples/s loss {:.4f}\n", label_, 100.0 * frac, done, total_, rate, loss);
  }
}

void Progress::finish(const std::string& summary) {
  if (!enabled_) return;
  if (tty_) say_notice("\r\033[K");
  say_notice("{} {}\n", label_, summary);
}

}  // namespace frugal
