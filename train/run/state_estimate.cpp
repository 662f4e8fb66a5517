#include "train/run/state_estimate.h"

#include "core/optim/optimizer.h"

namespace frugal::run {
namespace {

// Per element of a row-sparse weight matrix and per row of it: the optimizer's state as
// core/optim/optimizer.cpp allocates it (moments in the weights' precision, row-wise moments f32).
struct MomentBytes {
  double per_element = 0.0, per_row = 0.0;
};

MomentBytes moments(optim::Method method, bool row_wise, bool rowwise_momentum, double element) {
  constexpr double kRowCounter = sizeof(uint32_t);  // the lazy updates' step count of every row
  if (row_wise) {
    if (method == optim::Method::rowwise_adam)
      return {rowwise_momentum ? element : 0.0, 4.0 + kRowCounter};
    return {0.0, 4.0 + kRowCounter};  // row-wise Adagrad's accumulator
  }
  switch (method) {
    case optim::Method::sgd: return {0.0, kRowCounter};  // plain SGD keeps no moment
    case optim::Method::adagrad: return {element, kRowCounter};
    default: return {2.0 * element, kRowCounter};  // Adam's m and v (row-wise methods' per-element fallback)
  }
}

}  // namespace

StateEstimate estimate_state(const RunArgs& a, const data::DatasetStats& stats) {
  const double element = a.precision == Dtype::bf16 ? 2.0 : 4.0;
  const auto features = static_cast<double>(stats.features), labels = static_cast<double>(stats.labels);
  const bool row_wise = optim::Optimizer::row_wise_method(a.method);
  const MomentBytes in = moments(a.method, row_wise && a.rowwise_input.value_or(true), a.rowwise_momentum, element);
  const MomentBytes out = moments(a.method, row_wise, a.rowwise_momentum, element);
  StateEstimate e;
  e.per_width = features * (element + in.per_element) + labels * (element + out.per_element);
  // The biases (f32 with two moments at most) and the per-row state of both matrices.
  e.fixed = labels * 12.0 + features * in.per_row + labels * out.per_row;
  // The LSH tables: per label and table, its id and its bucket code (u32 each at most), and the
  // buckets' offsets (a bucket per ~1,000 / tables labels at the automatic width: well under a byte).
  if (a.sampler == layers::Sampler::lsh) e.fixed += labels * static_cast<double>(a.tables) * 9.0;
  return e;
}

}  // namespace frugal::run
