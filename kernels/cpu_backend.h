// The CPU Backend ("cpu"): oneDNN for dense products, vectorized oneTBB-parallel kernels for the
// rest (kernels/*.h). It registers itself when libfrugal is loaded (a static registrar in
// cpu_backend.cpp); layers reach it through host_backend() (core/backend.h).
#pragma once

#include <memory>

#include "core/backend.h"

namespace frugal::kernels {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return {}; }
  bool supports(Op op) const override;
  void synchronize() override {}
  void set_num_threads(int threads) override;
  int num_threads() const override;
  // bf16 products (kernels::matmul_bf16, oneDNN's AVX512-BF16 matmul) only where the --bf16-dot
  // mode is active on this CPU (kernels/bf16_dot.h): the instruction is what makes them pay, and
  // `off` asks for f32 arithmetic. Decided when called: a later mode change does not undo it.
  bool set_bf16_products(bool on) override;

  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate = false) override;
  void bias_act_forward(Tensor& y, const Tensor& bias, Act act) override;
  void bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) override;
  void sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act, Tensor& out) override;
  void sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre, RowGrad& grad) override;
  void active_logits(const Tensor& h, const ActiveTensors& active, const Tensor& w, const Tensor& bias,
                     Tensor& logits) override;
  void active_backward_input(const ActiveTensors& active, const Tensor& dlogits, const Tensor& w,
                             Tensor& grad_h) override;
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;
  void row_accumulate(RowWorkspace& ws, const ActiveTensors& entries, const Tensor& coefs, const Tensor& vecs,
                      RowGrad& grad, RowGrad* bias_grad) override;
  void xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) override;
  void xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) override;
  void xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                      Tensor& losses) override;
  void top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) override;
  void adam_rows(const RowUpdate& u) override;
  void sgd_rows(const RowUpdate& u) override;
  void adagrad_rows(const RowUpdate& u) override;
  void rowwise_adagrad_rows(const RowUpdate& u) override;
  void rowwise_adam_rows(const RowUpdate& u) override;
  void simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                     Tensor& codes) override;
  void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) override;
  void bucket_union(const BucketTables& tables, const BucketInput& q, ActiveTensors& out) override;
  void active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out) override;
  void bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids) override;
  double sum_squares(const Tensor& x) override;
  void scale(Tensor& x, float factor) override;
  void ranking_add(const RankingTensors& in, RankingState& state) override;

 private:
  bool bf16_products_ = false;
};

}  // namespace frugal::kernels
