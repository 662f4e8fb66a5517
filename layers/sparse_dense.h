// SparseDense: the input layer of a sparse network. h = act(x W + b) with x a sparse batch
// (features x values), W stored feature-major (F x out) so a point touches only its features' rows;
// the backward pass produces gradients for exactly those rows.
#pragma once

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/distinct_rows.h"
#include "core/layer.h"
#include "core/placement.h"

namespace frugal::layers {

struct SparseDenseOptions {
  size_t in = 0;   // number of input features
  size_t out = 0;  // number of neurons (of the whole layer when sliced)
  Act act = Act::relu;
  uint64_t seed = 1;
  Placement placement{};  // sliced: this rank computes neurons [slice_begin(), slice_end())
  Dtype storage = Dtype::f32;  // of the weight (bf16: half the bytes; computed in f32)
  void validate() const;
};

class SparseDense : public InputLayer {
 public:
  using Options = SparseDenseOptions;
  explicit SparseDense(const Options& options);
  ~SparseDense() override;
  std::string kind() const override { return "SparseDense"; }
  size_t in_features() const override { return options_.in; }
  size_t out_features() const override { return options_.out; }
  size_t slice_begin() const { return begin_; }
  size_t slice_end() const { return end_; }
  size_t local_out() const { return end_ - begin_; }
  const Placement& placement() const override { return options_.placement; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  const Tensor& forward(const SparseBatch& x) override;
  // Each part runs the backend's forward on a copy of its points; the kernel computes every row
  // alone, so the rows are forward()'s bits.
  const Tensor& forward_rows(const SparseBatch& x, size_t first, size_t count) override;
  void backward(const SparseBatch& x, const Tensor& grad_out) override;
  std::vector<Parameter*> feature_parameters() override { return {&weight_}; }

 private:
  // Fails, naming the id, on a feature id out of range.
  void check_features(const SparseBatch& x) const;

  Options options_;
  size_t begin_ = 0, end_ = 0;
  Parameter weight_, bias_;
  Tensor out_, grad_pre_;
  // The backend's views of the batches (the last forward pass's, forward_rows' part) and its row
  // accumulation state: core/backend.h's structs, which public headers do not show.
  struct BackendState;
  std::unique_ptr<BackendState> state_;
  SparseBatch part_;         // forward_rows' points
  Tensor part_out_;          // and their rows
  DistinctRows distinct_;    // the batch's feature rows, listed on the host for a device backend
};

}  // namespace frugal::layers
