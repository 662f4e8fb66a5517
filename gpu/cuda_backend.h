// The CUDA Backend ("cuda"): cuBLAS for dense products, kernels of its own (gpu/cuda_kernels.cu) for
// the rest. It registers itself when libfrugal is loaded, and only when cudaGetDeviceCount reports
// a device (gpu/cuda_info.h); otherwise find_backend("cuda") is null. No CUDA header here.
//
// First step, correct before fast: every op takes and returns host memory, as the interface says,
// by copying its inputs to device buffers (kept and grown per backend), computing there and copying
// the results back; ops that read a few rows of a large matrix (sparse input, active sets,
// optimizer rows, LSH of listed rows) copy only those rows. Weights and optimizer state resident on
// the device (Tensor::device() == cuda) are the next step; until then device() is the host.
#pragma once

#include <memory>
#include <mutex>

#include "core/backend.h"

namespace frugal::gpu {

namespace dev {
struct Context;
}

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  // Where the ops' inputs and outputs live: host memory (staged per op) for now.
  Device device() const override { return {}; }
  bool supports(Op op) const override;
  void synchronize() override;
  // The host-side work (sorting rows, gathering) is single-threaded; the count is only recorded.
  void set_num_threads(int threads) override;
  int num_threads() const override { return threads_; }

  void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
              bool accumulate = false) override;
  void bias_act_forward(Tensor& y, const Tensor& bias, Act act) override;
  void bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) override;
  void sparse_input_forward(const SparseBatch& x, const Tensor& w, const Tensor& bias, Act act, Tensor& out) override;
  void sparse_input_backward(RowWorkspace& ws, const SparseBatch& x, const Tensor& grad_pre, RowGrad& grad) override;
  void active_logits(const Tensor& h, const ActiveSets& active, const Tensor& w, const Tensor& bias,
                     std::vector<float>& logits) override;
  void active_backward_input(const ActiveSets& active, std::span<const float> dlogits, const Tensor& w,
                             Tensor& grad_h) override;
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;
  void row_accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids, const float* coefs,
                      const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) override;
  void xent_max(std::span<const float> z, const XentBatch& batch, std::span<float> max) override;
  void xent_sums(std::span<const float> z, const XentBatch& batch, std::span<const float> max,
                 std::span<float> sums) override;
  void xent_loss_grad(std::span<float> z, const XentBatch& batch, std::span<const float> max,
                      std::span<const float> sums, std::span<double> losses) override;
  void top_k(const TopKInput& in, size_t k, std::span<uint32_t> labels, std::span<float> scores) override;
  void adam_rows(const RowUpdate& u) override;
  void sgd_rows(const RowUpdate& u) override;
  void adagrad_rows(const RowUpdate& u) override;
  void simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                     uint32_t* codes) override;
  void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) override;

 private:
  // The device context, made on first use (registering creates nothing on the device); callers
  // hold mutex_, which serializes the ops (they share the staging buffers).
  dev::Context& context();
  void accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids, const float* coefs,
                  const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad);
  // adam_rows, sgd_rows or adagrad_rows (op): the rows gathered, updated on the device, scattered back.
  void optimizer_rows(const RowUpdate& u, Op op);

  std::mutex mutex_;
  dev::Context* ctx_ = nullptr;
  int threads_ = 1;
};

}  // namespace frugal::gpu
