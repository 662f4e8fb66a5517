// ForwardSplit: how TrainerOptions::overlap computes the input layer's forward pass at an exact
// sliced boundary: in two row parts, the first part's all-gather travelling while the second is
// computed, or whole. The same bits either way. `automatic` splits where the input layer's work on
// half the batch is at least kForwardSplitMinMultiplyAdds (on the widest slice): below that the
// split's extra round of messages costs more than the half it hides (bench/REPORT.md, "The forward
// all-gather in two halves"). The cost model (apps/plan/cost_model.h) applies the same rule.
#pragma once

#include <string_view>

namespace frugal::train {

enum class ForwardSplit { automatic, always, never };
// "auto", "on", "off", as frugal train's --overlap-forward names them.
inline std::string_view to_string(ForwardSplit split) {
  return split == ForwardSplit::always ? "on" : split == ForwardSplit::never ? "off" : "auto";
}
inline constexpr double kForwardSplitMinMultiplyAdds = 1 << 20;

// Whether `automatic` splits: `half_batch_multiply_adds` = the input layer's multiply-adds on half
// the batch, for the widest slice.
inline bool forward_split_pays(double half_batch_multiply_adds) {
  return half_batch_multiply_adds >= kForwardSplitMinMultiplyAdds;
}

}  // namespace frugal::train
