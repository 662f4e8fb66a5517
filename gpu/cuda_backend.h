// The CUDA Backend ("cuda"): cuBLAS for dense products, kernels of its own (gpu/cuda_kernels.cu) for
// the rest. It registers itself when libfrugal is loaded, and only when cudaGetDeviceCount reports
// a device (gpu/cuda_info.h); otherwise find_backend("cuda") is null. No CUDA header here.
//
// Its tensors live in device memory (core/buffer.h): alloc_buffer hands out blocks of a caching
// allocator (core/caching_allocator.h), so a step that makes the same tensors every step allocates
// nothing from the device after the first; set / get / copy / clear move bytes on the backend's one
// stream (pinned staging inside set and get), and transfers() counts what crosses. Every op reads
// and writes tensors where they are: the model, its optimizer state, activations, logits and
// gradients never leave the device; active sets arrive as tensors (set once by the layer), row
// gradients keep their row list here (RowGrad::device_rows) and Adam's update counts are raised
// here (RowUpdate::row_counts). The LSH sampler's codes, sets, negatives and tables are made here by
// its ops. What the interface still passes in host memory (tables built on the host, catch-up
// plans, a row list the host changed) is
// staged inside the op and counted; a host tensor given to an op is copied up for it (and back when the op
// writes it), counted too. Ops whose outputs are all device memory return once queued.
//
// A backend instance belongs to one rank, which issues its ops from one thread at a time: there is
// no lock around the ops (the allocator has its own).
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/caching_allocator.h"
#include "gpu/cuda_kernels.h"

namespace frugal::gpu {

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return {DeviceKind::cuda, 0}; }
  // The device's free memory plus the allocator's cached blocks.
  std::optional<uint64_t> state_memory_available() const override;
  // cuBLAS GemmEx on bf16 copies of the operands with f32 compute (tensor cores).
  bool set_bf16_products(bool on) override;
  bool supports(Op op) const override;
  void synchronize() override;
  // The host-side work (staging host arguments) is single-threaded; the count is only recorded.
  void set_num_threads(int threads) override;
  int num_threads() const override { return threads_; }

  std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;
  void set(Buffer& dst, size_t offset, const void* src, size_t bytes) override;
  void get(const Buffer& src, size_t offset, void* dst, size_t bytes) override;
  void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) override;
  void clear(Buffer& dst, size_t offset, size_t bytes) override;
  Transfers transfers() const override;
  // The caching allocator's counts: a steady step allocates nothing.
  CachingAllocator::Stats memory_stats() const;

  // Every op of core/backend_ops.h; on this backend:
  //   bucket_union: In the tables' device copy, made at their first look-up and again after each rebuild (a new
  //     generation); tables whose buckets do not fit a block's shared memory are looked up on the host by the host
  //     backend (core/backend.h's host_backend()).
  //   bucket_build: A rebuild on the device: the codes stay, the tables are made where bucket_union reads them.
  FRUGAL_BACKEND_OVERRIDES
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;

 private:
  class Args;
  // The device context, made on first use (registering creates nothing on the device).
  dev::Context& context() const;
  // adam_rows, sgd_rows or adagrad_rows (op).
  void optimizer_rows(const RowUpdate& u, Op op);
  // Row accumulation with the entries' offsets and ids given as in.
  void accumulate(RowWorkspace& ws, const dev::RowEntries& in, const Tensor& coefs, const Tensor& vecs,
                  RowGrad& grad, RowGrad* bias_grad);

  // A BucketTables' device copy in core/bucket_union.h's flat layout, per owner (a sampler's tables:
  // a few per model, replaced when their generation changes).
  struct DeviceBuckets {
    uint64_t generation = 0;
    Tensor offsets, ids;  // u32, in this backend's buffers
    uint32_t max_entries = 0;  // the sum over tables of their largest bucket
    uint32_t buckets = 0;      // the shape copied (checked with the generation)
    size_t tables = 0, total = 0;
  };
  DeviceBuckets& device_buckets(const BucketTables& tables);
  // The codes' output shaped n x tables; where the kernels write it (device or host memory).
  uint32_t* shaped_codes(Tensor& codes, size_t n, size_t tables, const char* op);
  static const uint32_t* positions(Args& args, const XentTensors& batch);
  std::unordered_map<const void*, DeviceBuckets> buckets_;

  mutable dev::Context* ctx_ = nullptr;
  std::shared_ptr<CachingAllocator> memory_;  // shared with every buffer made from it
  int threads_ = 1;
  bool bf16_products_ = false;
};

}  // namespace frugal::gpu
