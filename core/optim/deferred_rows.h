// --update-threshold: the rows of a row-sparse parameter whose step gradient is negligible next to
// the row's own running gradient scale are not updated in that step; their gradient waits in a
// residual (error feedback, as DCT-DP keeps on the wire) that is added to the row's next gradient,
// and the row is updated once the sum is no longer negligible or when the epoch ends
// (Optimizer::apply_deferred). A sampled negative whose probability is ~1e-6 has a gradient ~1e-6
// of the one it gets as a true label: Adam, which divides by its own tiny second moment, would still
// move it by a full step; SGD would move it by ~nothing. Deferring it keeps every gradient (the
// residual is the sum of the skipped ones) and skips the row's update.
//
// Rule, for a listed row r with step gradient g (f32, host memory): g' = g + residual[r];
// rms(x) = the root of x's mean square (rms(g) in core/rowwise.h's order, rms(g') summed with the
// addition, in column order); the row is deferred when rms(g') < threshold * scale[r], where scale[r] is the running mean of rms(g) over the row's
// gradients this epoch (0 before its first: a row's first gradient is always applied), updated after
// the decision as scale = 0.9 scale + 0.1 rms(g). A deferred row leaves the gradient's row list and
// keeps g' as its residual; an applied one takes g' as its gradient and drops its residual.
// Threshold 0 defers nothing: the step is bit for bit the step without this class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/parameter.h"
#include "core/tensor.h"

namespace frugal::optim {

class DeferredRows {
 public:
  DeferredRows(size_t rows, size_t cols, float threshold);

  // Applies the rule to grad's listed rows (host memory, sorted): deferred rows are removed from
  // grad (its rows and values compacted in place, order kept), applied rows carry their residual.
  void filter(RowGrad& grad);
  // Every residual into grad (which must be empty): the rows ascending, their residuals as values;
  // then no residual is left and every running scale starts again (an epoch's end).
  void take(RowGrad& grad);
  bool empty() const { return held_ == 0; }
  // Rows deferred and rows listed (before filtering) since the optimizer was made.
  uint64_t deferred() const { return deferred_; }
  uint64_t listed() const { return listed_; }
  // Bytes this keeps: the scales, the slot index and the residual rows' storage at its largest
  // (take() frees it at an epoch's end: the peak is what the run needed).
  size_t bytes() const;

 private:
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  size_t cols_;
  float threshold_;
  std::vector<float> scale_;       // per row: running mean of its gradients' RMS this epoch
  std::vector<uint32_t> slot_;     // per row: its residual's slot, or kNoSlot
  Tensor residual_;                // slot s: a residual row (grown by doubling)
  std::vector<uint32_t> free_;     // slots not in use
  size_t held_ = 0;                // slots in use
  size_t peak_residual_bytes_ = 0;
  uint64_t deferred_ = 0, listed_ = 0;
  std::vector<uint8_t> keep_;      // per listed row of the current filter: applied (1) or deferred (0)
  std::vector<float> rms_;         // per listed row: rms(g) (the step's own gradient)
  uint32_t acquire();
};

}  // namespace frugal::optim
