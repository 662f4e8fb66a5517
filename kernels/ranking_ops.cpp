#include "kernels/ranking_ops.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/ranking_counts.h"

namespace frugal::kernels {
namespace {

// The program's marks over the state's flag words: whoever sets a flag first counts it, so the counts
// do not depend on the threads' order.
struct FlagMarks {
  std::span<uint32_t> relevant_flags, covered_flags;
  std::span<uint64_t> counts;
  size_t labels, num_ks;
  size_t words;
  static void set(uint32_t* flags, uint32_t l, uint64_t& count) {
    const uint32_t bit = uint32_t{1} << (l % 32);
    if ((std::atomic_ref<uint32_t>(flags[l / 32]).fetch_or(bit, std::memory_order_relaxed) & bit) == 0)
      std::atomic_ref<uint64_t>(count).fetch_add(1, std::memory_order_relaxed);
  }
  void relevant(uint32_t l) const { set(relevant_flags.data(), l, counts[num_ks]); }
  void covered(uint64_t q, uint32_t t) const { set(covered_flags.data() + q * words, t, counts[q]); }
};

}  // namespace

void ranking_add(const RankingTensors& in, RankingState& state) {
  const RankingShape shape = in.validate(state);
  const size_t rows = shape.rows, width = shape.width, cols = shape.num_ks * ranking::kSums;
  if (rows == 0) return;
  const std::span<const uint32_t> top = in.top->u32(), labels = in.labels->u32();
  const std::span<const uint64_t> offsets = in.label_offsets->u64().subspan(in.first_row, rows + 1);
  const std::span<const double> inverse = in.inverse != nullptr ? in.inverse->f64() : std::span<const double>();
  const ranking::Spec spec{.ks = in.ks->u64().data(), .num_ks = shape.num_ks, .max_k = shape.max_k,
                           .discounts = in.discounts->f64().data(),
                           .inverse = in.inverse != nullptr ? inverse.data() : nullptr,
                           .num_inverse = inverse.size(), .unseen = in.unseen};
  const FlagMarks marks{state.relevant.u32(), state.covered.u32(), state.counts.u64(), shape.labels, shape.num_ks,
                        state.relevant.size()};
  const auto beyond = [&](size_t i, const char* what, uint32_t l) {
    return fmt::format("ranking_add: point {} has {} {}, beyond the {} labels counted", in.first_row + i, what, l,
                       shape.labels);
  };
  std::vector<double> shares(rows * cols);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, rows, 16), [&](const auto& r) {
    std::vector<uint32_t> truth;
    std::vector<double> weights;
    for (size_t i = r.begin(); i < r.end(); ++i) {
      FRUGAL_CHECK(offsets[i] <= offsets[i + 1] && offsets[i + 1] <= labels.size(),
                   fmt::format("ranking_add: point {}'s labels [{}, {}) are not within the {} labels",
                               in.first_row + i, offsets[i], offsets[i + 1], labels.size()));
      truth.assign(labels.begin() + static_cast<ptrdiff_t>(offsets[i]),
                   labels.begin() + static_cast<ptrdiff_t>(offsets[i + 1]));
      std::sort(truth.begin(), truth.end());
      truth.erase(std::unique(truth.begin(), truth.end()), truth.end());
      if (!truth.empty()) FRUGAL_CHECK(truth.back() < shape.labels, beyond(i, "label", truth.back()));
      const uint32_t* row = top.data() + i * width;
      for (size_t j = 0; j < width; ++j)
        FRUGAL_CHECK(row[j] == UINT32_MAX || row[j] < shape.labels, beyond(i, "prediction", row[j]));
      weights.clear();
      if (spec.inverse != nullptr) {
        for (const uint32_t l : truth) weights.push_back(spec.weight(l));
        std::sort(weights.begin(), weights.end(), std::greater<>());
      }
      ranking::point(spec, truth.data(), truth.size(), spec.inverse != nullptr ? weights.data() : nullptr, row, width,
                     shares.data() + i * cols, marks);
    }
  });
  const std::span<double> sums = state.sums.f64();
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < cols; ++c) sums[c] += shares[i * cols + c];
}

}  // namespace frugal::kernels
