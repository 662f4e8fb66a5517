#include "train/divergence.h"

#include <cmath>

#include <fmt/format.h>

namespace frugal::train {

std::string_view to_string(OnDivergence d) {
  switch (d) {
    case OnDivergence::stop: return "stop";
    case OnDivergence::skip_batch: return "skip-batch";
  }
  return "?";
}

std::string divergence_where(uint64_t epoch, uint64_t step) {
  return step > 0 ? fmt::format("epoch {}, step {}", epoch, step) : fmt::format("epoch {}", epoch);
}

void throw_divergence(const std::string& where, std::string_view what, double value, double lr) {
  const std::string shown = std::isnan(value) ? "is NaN" : std::isinf(value) ? "is infinite" : fmt::format("is {:g}", value);
  throw_divergence_finding(where, fmt::format("the {} {}", what, shown), lr);
}

void throw_divergence_finding(const std::string& where, std::string_view finding, double lr) {
  const std::string rate = lr > 0 ? fmt::format("lr {:g}: ", lr) : std::string();
  throw DivergenceError(fmt::format(
      "{}: {} (training diverged); the run stops and its last good checkpoint is kept. "
      "Likely causes: a learning rate too high for this data ({}try one 3-10x smaller, or --clip-norm), or "
      "feature values too large in the training data (scale them, or heed the data's value warnings). "
      "--on-divergence skip-batch drops such a batch's update instead of stopping",
      where, finding, rate));
}

}  // namespace frugal::train
