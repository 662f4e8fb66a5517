// Dense: a fully connected hidden layer, y = act(x W^T + b), W stored neuron-major (out x in) so a
// slice of neurons is a block of rows. It computes on its Backend (oneDNN products on the CPU).
// Sliced over a model-parallel group, a rank computes its block of neurons from the whole input,
// and its backward returns its share of dLoss/dInput (the group sums the shares).
#pragma once

#include <cstdint>

#include "core/layer.h"
#include "core/placement.h"

namespace frugal::layers {

struct DenseOptions {
  size_t in = 0;
  size_t out = 0;
  Act act = Act::relu;
  uint64_t seed = 1;
  Placement placement{};  // sliced: this rank computes neurons [slice_begin(), slice_end())
  void validate() const;
};

class Dense : public HiddenLayer {
 public:
  using Options = DenseOptions;
  explicit Dense(const Options& options);
  std::string kind() const override { return "Dense"; }
  size_t in_features() const override { return options_.in; }
  size_t out_features() const override { return options_.out; }
  size_t slice_begin() const { return begin_; }
  size_t slice_end() const { return end_; }
  const Placement& placement() const override { return options_.placement; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  const Tensor& forward(const Tensor& in) override;
  const Tensor& backward(const Tensor& in, const Tensor& grad_out) override;

 private:
  Options options_;
  size_t begin_ = 0, end_ = 0;
  Parameter weight_, bias_;
  Tensor out_, grad_pre_, grad_in_;
};

}  // namespace frugal::layers
