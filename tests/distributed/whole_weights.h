// Test helpers shared by the distributed tests, which compare runs on different rank counts
// weight by weight: gather a rank's parameter slices into whole matrices, and a norm-wise distance.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "core/model.h"
#include "core/tensor.h"

namespace frugal::testing {

// Copies `local`, laid out like p's slice (its value or an optimizer moment), into its place in
// `full` (f32 whatever the slice's precision), allocating the whole matrix on first use.
inline void add_slice(const Parameter& p, const Tensor& local, Tensor& full) {
  if (full.empty()) full = Tensor(p.full_rows, p.full_cols);
  for (size_t r = 0; r < local.rows(); ++r)
    for (size_t c = 0; c < local.cols(); ++c)
      full.at(p.sliced_axis == 0 ? r + p.offset : r, p.sliced_axis == 1 ? c + p.offset : c) = local.value_at(r, c);
}

// Copies every parameter slice of `model` (this rank's) into its place in whole[name]. Callers
// serialize calls from several ranks.
inline void add_slices(Model& model, std::map<std::string, Tensor>& whole) {
  for (Parameter* p : model.parameters()) add_slice(*p, p->value, whole[p->name]);
}

// ||a - b|| / ||b||: sums taken in another order differ in the last bits, and Adam's normalization
// lets those bits grow in weights whose gradients are tiny, so tests compare norm-wise.
inline double relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a.data()[i]) - b.data()[i];
    diff += d * d;
    norm += double(b.data()[i]) * b.data()[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace frugal::testing
