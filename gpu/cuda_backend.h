// The CUDA Backend ("cuda"): cuBLAS for dense products, kernels of its own (gpu/cuda_kernels.cu) for
// the rest. It registers itself when libfrugal is loaded, and only when cudaGetDeviceCount reports
// a device (gpu/cuda_info.h); otherwise find_backend("cuda") is null. No CUDA header here.
//
// Every op takes and returns host memory, as the interface says. The model stays on the device: the
// weights, biases and optimizer moments the ops are given live in a DeviceMirror
// (core/device_mirror.h) of device copies, uploaded once and again only after the host writes them
// (a checkpoint load, a reslice); an optimizer op updates the copies and writes the changed weight
// rows back to the host, and the moments come back only when Optimizer::state() asks
// (flush_state()). What crosses per op is the batch, the activations, their gradients and those
// weight rows, staged through pinned host and device buffers kept and grown per backend. Dense operands inside a
// device copy (matmul's weights) and LSH codes of weights are read from their copies too.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "gpu/cuda_kernels.h"

namespace frugal {
class DeviceMirror;
}

namespace frugal::gpu {

namespace dev {
struct Context;
}
class CudaMemory;

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  // Where the ops' inputs and outputs live: host memory (the device copies are the backend's own).
  Device device() const override { return {}; }
  // Device memory free plus what the model already holds there, and host memory (the host keeps
  // the reference copy): the smaller.
  std::optional<uint64_t> state_memory_available() const override;
  void flush_state() override;
  // cuBLAS GemmEx on bf16 copies of the operands with f32 compute (tensor cores).
  bool set_bf16_products(bool on) override;
  // Bytes of model tensors held on the device.
  size_t resident_bytes() const;
  bool supports(Op op) const override;
  void synchronize() override;
  // The host-side work (sorting rows, gathering) is single-threaded; the count is only recorded.
  void set_num_threads(int threads) override;
  int num_threads() const override { return threads_; }

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
  // In the tables' device copy, made at their first look-up and again after each rebuild (a new
  // generation); tables whose buckets do not fit a block's shared memory are looked up on the host
  // by the CPU backend.
  void bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveSets& out) override;

 private:
  // The device context, made on first use (registering creates nothing on the device); callers
  // hold mutex_, which serializes the ops (they share the staging buffers).
  dev::Context& context();
  // t's device copy (made or refreshed by the mirror): f32 only, or (resident_matrix) f32 or bf16.
  dev::In<float> resident(const Tensor& t);
  dev::Matrix resident_matrix(const Tensor& t);
  // p's device address when [p, p + floats) lies in a current device copy, else p as host memory.
  dev::In<float> resident_range(const float* p, size_t floats);
  // The rows of x an LSH op hashes: x's device copy with the row ids, or host rows gathered.
  struct Listed {
    dev::Matrix x;
    const uint32_t* rows = nullptr;
    std::vector<float> gathered;
  };
  Listed listed(const Tensor& x, std::span<const uint32_t> rows);
  void accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids, const float* coefs,
                  const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad);
  // adam_rows, sgd_rows or adagrad_rows (op): the rows gathered, updated on the device, scattered back.
  void optimizer_rows(const RowUpdate& u, Op op);

  // A BucketTables' device copy in core/bucket_union.h's flat layout, per owner (a sampler's tables:
  // a few per model, replaced when their generation changes).
  struct DeviceBuckets {
    uint64_t generation = 0;
    void* offsets = nullptr;
    void* ids = nullptr;
    uint32_t max_entries = 0;  // the sum over tables of their largest bucket
    uint32_t buckets = 0;      // the shape copied (checked with the generation)
    size_t tables = 0, total = 0;
  };
  DeviceBuckets& device_buckets(const BucketTables& tables);
  std::unordered_map<const void*, DeviceBuckets> buckets_;

  mutable std::mutex mutex_;
  dev::Context* ctx_ = nullptr;
  CudaMemory* memory_ = nullptr;
  DeviceMirror* mirror_ = nullptr;
  int threads_ = 1;
  bool bf16_products_ = false;
};

}  // namespace frugal::gpu
