// MirrorBackend ("mirror"): the CPU backend's kernels run on copies of the model tensors kept by a
// DeviceMirror (core/device_mirror.h) whose "device" is host memory. It makes the same choices as the
// CUDA backend (gpu/cuda_backend.cpp) about which arguments live on the device: weights, biases and
// optimizer moments (acquired), the inputs of matmul, top_k's bias and LSH codes where a current copy
// exists (looked up), everything else staged. Weights are written through, moments stay ahead until
// flush_state(). A broken protocol (a forgotten flush, a host write the mirror misses, a device copy
// that is not refreshed) makes a training on "mirror" differ from one on "cpu": the test
// `device_mirror` checks that they give the same bits, on a machine without a GPU.
#pragma once

#include <memory>
#include <unordered_map>

#include "core/backend.h"
#include "core/device_mirror.h"

namespace frugal::testing {

class MirrorBackend : public Backend {
 public:
  MirrorBackend();
  ~MirrorBackend() override;

  std::string name() const override { return "mirror"; }
  Device device() const override { return {}; }
  bool supports(Op op) const override { return cpu_.supports(op); }
  void synchronize() override {}
  void set_num_threads(int threads) override { cpu_.set_num_threads(threads); }
  int num_threads() const override { return cpu_.num_threads(); }
  void flush_state() override { mirror_->flush(); }

  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate = false) override;
  void bias_act_forward(Tensor& y, const Tensor& bias, Act act) override;
  void bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) override;
  void sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act, Tensor& out) override;
  void sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre, RowGrad& grad) override;
  void active_logits(const Tensor& h, const ActiveSets& active, const Tensor& w, const Tensor& bias,
                     Tensor& logits) override;
  void active_backward_input(const ActiveSets& active, const Tensor& dlogits, const Tensor& w,
                             Tensor& grad_h) override;
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;
  void row_accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids, const Tensor& coefs,
                      const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) override;
  void xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) override;
  void xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) override;
  void xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                      Tensor& losses) override;
  void top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) override;
  void adam_rows(const RowUpdate& u) override;
  void sgd_rows(const RowUpdate& u) override;
  void adagrad_rows(const RowUpdate& u) override;
  void simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                     uint32_t* codes) override;
  void dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) override;
  void bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveSets& out) override {
    cpu_.bucket_union(tables, q, out);
  }

  const DeviceMirror& mirror() const { return *mirror_; }
  // Bytes the optimizer ops wrote through to the host (the changed weight rows).
  uint64_t written_through_bytes() const { return written_through_; }

 private:
  // The "device": host tensors shaped like the tensors they copy, found by their data address.
  class HostMemory : public DeviceMirror::Memory {
   public:
    void* allocate(const Tensor& like, size_t bytes) override;
    void release(void* device) noexcept override;
    void upload(void* device, const void* host, size_t bytes) override;
    void download(void* host, const void* device, size_t bytes) override;
    Tensor& tensor(const void* device);

   private:
    std::unordered_map<const void*, std::unique_ptr<Tensor>> tensors_;
  };
  // The device copy of a model tensor (refreshed when the host wrote it).
  Tensor& copy_of(const Tensor& t);
  // The device copy when a current one exists, else t itself.
  const Tensor& current(const Tensor& t);
  void optimizer_rows(const RowUpdate& u, Op op);

  Backend& cpu_;
  HostMemory memory_;
  std::unique_ptr<DeviceMirror> mirror_;
  uint64_t written_through_ = 0;
};

}  // namespace frugal::testing
