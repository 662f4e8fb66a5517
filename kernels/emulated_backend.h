// The counting device ("emulated", `--device emulated`): a device for testing, emulated on the host.
// Its buffers are host memory that the host may NOT touch (Buffer::is_host() is false, so a Tensor's
// host accessors refuse them, as they refuse a GPU's), it moves bytes only through set / get / copy,
// and it counts every byte that crosses between the host and itself. Its ops run the CPU backend's
// kernels on its own memory, so a training on it gives the CPU backend's bits.
//
// What crosses is counted honestly, as a real device would have to move it: an op argument that is
// host memory (a host tensor, a span, a vector, a sparse batch) is staged up before the op and an
// output in host memory comes down after it; tensors in the device's own buffers cost nothing.
// Backend::transfers() holds the totals (the metrics log's host_device_bytes_per_sample), and
// FRUGAL_EMULATED_PROFILE=1 prints the per-op table of core/op_profile.h at exit (the counterpart
// of FRUGAL_CUDA_PROFILE), so that a design that keeps a step on the device is checked on any
// machine, without a GPU.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"
#include "core/caching_allocator.h"

namespace frugal::kernels {

class EmulatedBackend : public Backend {
 public:
  EmulatedBackend();
  ~EmulatedBackend() override;

  std::string name() const override { return "emulated"; }
  Device device() const override { return {DeviceKind::emulated, 0}; }
  bool supports(Op op) const override { return cpu_.supports(op); }
  void synchronize() override {}
  void set_num_threads(int threads) override { cpu_.set_num_threads(threads); }
  int num_threads() const override { return cpu_.num_threads(); }
  // The CPU backend's products, bf16 ones included (its answer, its bits).
  bool set_bf16_products(bool on) override { return cpu_.set_bf16_products(on); }

  std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;
  void set(Buffer& dst, size_t offset, const void* src, size_t bytes) override;
  void get(const Buffer& src, size_t offset, void* dst, size_t bytes) override;
  void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) override;
  void clear(Buffer& dst, size_t offset, size_t bytes) override;
  Transfers transfers() const override;
  // The caching allocator's counts (core/caching_allocator.h): a steady step allocates nothing.
  CachingAllocator::Stats memory_stats() const;

  // Every op of core/backend_ops.h; on this backend:
  //   bucket_union: Host tables are copied to the device once per generation (as the CUDA backend keeps them);
  //     tables built here (bucket_build) are read where they are.
  //   bucket_build: On the device: nothing crosses (the codes are the hash op's, the tables stay for bucket_union).
  //   sum_squares: The sum comes down: 8 bytes.
  FRUGAL_BACKEND_OVERRIDES
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;

 private:
  // Checks a device-found row list against the caller's and keeps it on the device (RowGrad).
  void keep_device_rows(RowGrad& grad, const std::vector<uint32_t>& found, const char* op, const char* what);
  friend class Staged;
  void count_up(uint64_t bytes);
  void count_down(uint64_t bytes);
  void optimizer_rows(const RowUpdate& u, Op op);

  Backend& cpu_;
  std::shared_ptr<CachingAllocator> memory_;  // shared with every buffer made from it
  std::atomic<uint64_t> up_bytes_{0}, up_calls_{0}, down_bytes_{0}, down_calls_{0}, device_bytes_{0};
  std::mutex tables_mutex_;
  std::unordered_map<const void*, uint64_t> table_generations_;  // the tables copied, by owner
};

}  // namespace frugal::kernels
