// Dense: a fully connected hidden layer, y = act(x W^T + b), W stored neuron-major (out x in) so a
// slice of neurons is a block of rows. The products run through oneDNN.
#pragma once

#include <cstdint>

#include "core/layer.h"

namespace frugal::layers {

struct DenseOptions {
  size_t in = 0;
  size_t out = 0;
  Act act = Act::relu;
  uint64_t seed = 1;
  void validate() const;
};

class Dense : public HiddenLayer {
 public:
  using Options = DenseOptions;
  explicit Dense(const Options& options);
  std::string kind() const override { return "Dense"; }
  size_t in_features() const override { return options_.in; }
  size_t out_features() const override { return options_.out; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  const Tensor& forward(const Tensor& in) override;
  const Tensor& backward(const Tensor& in, const Tensor& grad_out) override;

 private:
  Options options_;
  Parameter weight_, bias_;
  Tensor out_, grad_pre_, grad_in_;
};

}  // namespace frugal::layers
