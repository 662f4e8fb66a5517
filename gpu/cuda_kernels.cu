// The device half of the CUDA backend (gpu/cuda_kernels.h): staging buffers, cuBLAS, CUB and the
// kernels. Every kernel uses grid-stride loops (any size fits one launch) and gives each sum to one
// thread, which adds in the order the CPU kernels (kernels/*_ops.cpp) use; a block's threads share
// only work with no sum split across them (a row's top-k, a sample's logits). No float atomics, so
// the results do not depend on scheduling, and with -fmad=false most ops give the CPU's bits. CUB
// sorts row ids for row accumulation: a stable sort, whose output is unique.
#include "gpu/cuda_kernels.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/active_extend.h"
#include "core/rowwise.h"
#include "core/bucket_build.h"
#include "core/bucket_union.h"
#include "core/check.h"
#include "core/hash32.h"
#include "core/op_profile.h"

namespace frugal::gpu::dev {
namespace {

[[noreturn]] void fail(const char* file, int line, const char* what, const std::string& message) {
  throw_check_failure(file, line, what, "CUDA backend: " + message);
}

void check_cuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) fail(file, line, what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
}

void check_blas(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(file, line, what, "cuBLAS status " + std::to_string(static_cast<int>(s)));
}

#define FRUGAL_CUDA(call) check_cuda((call), #call, __FILE__, __LINE__)
#define FRUGAL_CUBLAS(call) check_blas((call), #call, __FILE__, __LINE__)
#define FRUGAL_LAUNCHED() check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

struct Buffer {
  void* p = nullptr;
  size_t capacity = 0;
};

// FRUGAL_CUDA_PROFILE=1: the per-op table of core/op_profile.h for this file's ops.
OpProfile& cuda_profile() {
  static OpProfile profile("cuda profile (FRUGAL_CUDA_PROFILE)", "FRUGAL_CUDA_PROFILE");
  return profile;
}

class OpTimer : public frugal::OpTimer {
 public:
  explicit OpTimer(const char* op) : frugal::OpTimer(cuda_profile(), op) {}
};

}  // namespace

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;  // every op's work, cuBLAS's and every copy included
  cublasHandle_t blas = nullptr;
  std::vector<Buffer> slots;   // device staging buffers, by position within an op; grown, never shrunk
  std::vector<Buffer> pinned;  // pinned host buffers, likewise: the host side of every staged copy
  // An op that staged host inputs and returned before its copies ran (its outputs stay on the
  // device) leaves its pinned buffers in use until this event: the next op to stage waits for it.
  cudaEvent_t pinned_free = nullptr;
  bool pinned_busy = false;
  // What crossed (set, get, staged arguments) and what moved within the device (copy).
  std::atomic<uint64_t> up_bytes{0}, up_calls{0}, down_bytes{0}, down_calls{0}, device_bytes{0};
  void count_up(size_t bytes) {
    up_bytes.fetch_add(bytes, std::memory_order_relaxed);
    up_calls.fetch_add(1, std::memory_order_relaxed);
  }
  void count_down(size_t bytes) {
    down_bytes.fetch_add(bytes, std::memory_order_relaxed);
    down_calls.fetch_add(1, std::memory_order_relaxed);
  }
};

namespace {

constexpr int kThreads = 256;

// Blocks for n grid-stride items (at least 1; capped, the loops cover the rest).
unsigned blocks_for(size_t n, size_t per_block = kThreads) {
  const size_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<size_t>(b, 1, size_t{1} << 20));
}

// The buffers of one op: its i-th device request uses device slot i, its j-th copy pinned slot j,
// each grown when too small. Device slots are reused by the next op, which the stream orders after
// this one. Copies go through pinned host memory, so they are true asynchronous DMA: an upload is
// the host's memcpy into its pinned slot, then a copy the stream runs when it gets there; a
// download lands in its pinned slot and reaches the caller's memory in finish(). An op whose
// outputs are all device memory never calls finish(): it returns once its work is queued.
class Staging {
 public:
  Staging(Context& ctx, const char* op) : ctx_(ctx), timer_(op) { FRUGAL_CUDA(cudaSetDevice(ctx.device)); }
  ~Staging() {
    if (finished_) return;
    if (std::uncaught_exceptions() > 0) {
      // An op that threw: its queued work still reads its buffers; they must not be reused before.
      (void)cudaStreamSynchronize(ctx_.stream);
      ctx_.pinned_busy = false;
      return;
    }
    if (staged_) {  // uploads still in flight from pinned memory: the next op to stage waits
      if (cudaEventRecord(ctx_.pinned_free, ctx_.stream) == cudaSuccess) {
        ctx_.pinned_busy = true;
      } else {
        (void)cudaStreamSynchronize(ctx_.stream);
      }
    }
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  template <class T>
  T* alloc(size_t n) {
    return static_cast<T*>(get(ctx_.slots, next_slot_, std::max<size_t>(n, 1) * sizeof(T), false));
  }
  // Host memory up to a device slot (counted as crossing).
  template <class T>
  T* up(const T* host, size_t n) {
    T* d = alloc<T>(n);
    up_to(d, host, n);
    return d;
  }
  // Host memory up to the device address d (a buffer's: Backend::set).
  template <class T>
  void up_to(T* d, const T* host, size_t n) {
    if (n == 0) return;
    void* staged = pinned(n * sizeof(T));
    const auto t0 = clock();
    std::memcpy(staged, host, n * sizeof(T));
    count(timer_.stats.copy_s, t0);
    timer_.stats.bytes_up += n * sizeof(T);
    ctx_.count_up(n * sizeof(T));
    staged_ = true;
    FRUGAL_CUDA(cudaMemcpyAsync(d, staged, n * sizeof(T), cudaMemcpyHostToDevice, ctx_.stream));
  }
  // Host memory up when it is host memory, else (device) as it is.
  template <class T>
  const T* up_or_device(const T* p, size_t n, bool on_device) {
    return on_device ? p : up(p, n);
  }
  // Device memory down to host memory, delivered by finish() (counted as crossing).
  template <class T>
  void down(T* host, const T* d, size_t n) {
    if (n == 0) return;
    void* staged = pinned(n * sizeof(T));
    FRUGAL_CUDA(cudaMemcpyAsync(staged, d, n * sizeof(T), cudaMemcpyDeviceToHost, ctx_.stream));
    timer_.stats.bytes_down += n * sizeof(T);
    ctx_.count_down(n * sizeof(T));
    pending_.push_back({host, staged, n * sizeof(T)});
  }
  // Waits for the op's copies and kernels: its host outputs are filled when this returns. An op
  // may finish more than once (a result it needs before going on).
  void finish() {
    auto t0 = clock();
    FRUGAL_CUDA(cudaStreamSynchronize(ctx_.stream));
    count(timer_.stats.wait_s, t0);
    ctx_.pinned_busy = false;
    t0 = clock();
    for (const Pending& p : pending_) std::memcpy(p.host, p.staged, p.bytes);
    count(timer_.stats.copy_s, t0);
    pending_.clear();
    staged_ = false;
    finished_ = true;
  }
  cudaStream_t stream() const { return ctx_.stream; }

 private:
  struct Pending {
    void* host;
    const void* staged;
    size_t bytes;
  };
  // The profile's clock, read only when the profile is on.
  std::chrono::steady_clock::time_point clock() const {
    return timer_.on() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  }
  void count(double& seconds, std::chrono::steady_clock::time_point t0) const {
    if (timer_.on()) seconds += seconds_since(t0);
  }
  // The next pinned slot, once the previous op's uploads out of pinned memory have run.
  void* pinned(size_t bytes) {
    if (ctx_.pinned_busy) {
      const auto t0 = clock();
      FRUGAL_CUDA(cudaEventSynchronize(ctx_.pinned_free));
      count(timer_.stats.wait_s, t0);
      ctx_.pinned_busy = false;
    }
    return get(ctx_.pinned, next_pinned_, bytes, true);
  }
  void* get(std::vector<Buffer>& pool, size_t& next, size_t bytes, bool host) {
    finished_ = false;
    if (next == pool.size()) pool.emplace_back();
    Buffer& b = pool[next++];
    if (bytes > b.capacity) {
      const size_t capacity = std::max(bytes, b.capacity * 2);
      // The old buffer may still be read by work queued before this op: drain first.
      FRUGAL_CUDA(cudaStreamSynchronize(ctx_.stream));
      ctx_.pinned_busy = false;
      if (b.p != nullptr) FRUGAL_CUDA(host ? cudaFreeHost(b.p) : cudaFree(b.p));
      b.p = nullptr;
      b.capacity = 0;
      FRUGAL_CUDA(host ? cudaHostAlloc(&b.p, capacity, cudaHostAllocDefault) : cudaMalloc(&b.p, capacity));
      b.capacity = capacity;
    }
    return b.p;
  }
  Context& ctx_;
  OpTimer timer_;
  size_t next_slot_ = 0, next_pinned_ = 0;
  std::vector<Pending> pending_;
  bool finished_ = true;
  bool staged_ = false;  // uploads from pinned memory queued since the last finish()
};

// A weight matrix's element widened to f32: f32 storage as it is, bf16 the high half of an f32
// (core/tensor.h), so the f32 kernels on widened values give the CPU's bf16 bits.
__device__ float load(const float* p, size_t i) { return p[i]; }
__device__ float load(const uint16_t* p, size_t i) { return __uint_as_float(static_cast<uint32_t>(p[i]) << 16); }

// Stores of an updated state element (kernels/vector_ops.cpp's stochastic_bits and nearest_bits on
// bf16; f32 stores as it is).
__device__ void store_stochastic(float* p, size_t i, float v, uint32_t) { p[i] = v; }
__device__ void store_nearest(float* p, size_t i, float v) { p[i] = v; }
__device__ uint32_t nan_bit(uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u; }
__device__ void store_stochastic(uint16_t* p, size_t i, float v, uint32_t random16) {
  const uint32_t bits = __float_as_uint(v);
  p[i] = static_cast<uint16_t>(((bits + random16) >> 16) | nan_bit(bits));
}
__device__ void store_nearest(uint16_t* p, size_t i, float v) {
  const uint32_t bits = __float_as_uint(v);
  p[i] = static_cast<uint16_t>(((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) | nan_bit(bits));
}


// kernels/vector_ops.cpp's dot: 16 partial sums, then a pairwise reduction in a fixed order.
template <class B>
__device__ float dot16(const float* a, const B* b, size_t n) {
  constexpr size_t kLanes = 16;
  float acc[kLanes];
  for (size_t l = 0; l < kLanes; ++l) acc[l] = 0.0f;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) acc[l] += a[i + l] * load(b, i + l);
  for (size_t l = 0; i + l < n; ++l) acc[l] += a[i + l] * load(b, i + l);
  for (size_t w = kLanes / 2; w > 0; w /= 2)
    for (size_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

__device__ uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__device__ size_t global_id() { return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ size_t global_stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

// --- dense ------------------------------------------------------------------------------------

__global__ void bias_act_kernel(float* y, size_t n, size_t cols, const float* bias, bool relu) {
  for (size_t idx = global_id(); idx < n; idx += global_stride()) {
    const float v = y[idx] + bias[idx % cols];
    y[idx] = (relu && v < 0.0f) ? 0.0f : v;
  }
}

__global__ void relu_mask_kernel(float* grad, const float* y, size_t n) {
  for (size_t idx = global_id(); idx < n; idx += global_stride())
    if (y[idx] <= 0.0f) grad[idx] = 0.0f;
}

// One thread per column, rows in order (the CPU's column sums).
__global__ void column_sums_kernel(const float* grad, size_t rows, size_t cols, float* out) {
  for (size_t c = global_id(); c < cols; c += global_stride()) {
    float s = 0.0f;
    for (size_t i = 0; i < rows; ++i) s += grad[i * cols + c];
    out[c] = s;
  }
}

// --- sparse and active sets ---------------------------------------------------------------------

// A block per point, its threads over the columns.
template <class W>
__global__ void sparse_forward_kernel(const uint64_t* offsets, size_t points, const uint32_t* ids, const float* vals,
                                      const W* w, size_t h, const float* bias, bool relu, float* out) {
  for (size_t i = blockIdx.x; i < points; i += gridDim.x)
    for (size_t c = threadIdx.x; c < h; c += blockDim.x) {
      float o = bias[c];
      for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) o += vals[e] * load(w, static_cast<size_t>(ids[e]) * h + c);
      out[i * h + c] = relu ? (o > 0.0f ? o : 0.0f) : o;
    }
}

template <class W>
__global__ void active_logits_kernel(const float* h, size_t d, const uint32_t* sample, const uint32_t* ids,
                                     size_t entries, const W* w, const float* bias, const float* logit_offsets,
                                     float* logits) {
  for (size_t e = global_id(); e < entries; e += global_stride()) {
    const size_t r = ids[e];
    float z = dot16(h + static_cast<size_t>(sample[e]) * d, w + r * d, d) + bias[r];
    if (logit_offsets != nullptr) z += logit_offsets[e];  // a separate rounding step, as on the CPU
    logits[e] = z;
  }
}

template <class W>
__global__ void active_backward_kernel(const uint64_t* offsets, size_t samples, const uint32_t* ids,
                                       const float* dlogits, const W* w, size_t d, float* grad_h) {
  for (size_t i = blockIdx.x; i < samples; i += gridDim.x)
    for (size_t c = threadIdx.x; c < d; c += blockDim.x) {
      float g = 0.0f;
      for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
        const float dl = dlogits[e];
        if (dl != 0.0f) g += dl * load(w, static_cast<size_t>(ids[e]) * d + c);
      }
      grad_h[i * d + c] = g;
    }
}

// A block per output row, its threads over the columns; entries in sample order.
__global__ void row_sums_kernel(const uint64_t* row_start, size_t rows, const uint32_t* sample, const float* coef,
                                const float* vecs, size_t d, float* out, float* bias_out) {
  for (size_t j = blockIdx.x; j < rows; j += gridDim.x) {
    const uint64_t first = row_start[j], last = row_start[j + 1];
    for (size_t c = threadIdx.x; c < d; c += blockDim.x) {
      float g = coef[first] * vecs[static_cast<size_t>(sample[first]) * d + c];
      for (uint64_t p = first + 1; p < last; ++p) g += coef[p] * vecs[static_cast<size_t>(sample[p]) * d + c];
      out[j * d + c] = g;
    }
    if (bias_out != nullptr && threadIdx.x == 0) {
      float b = coef[first];
      for (uint64_t p = first + 1; p < last; ++p) b += coef[p];
      bias_out[j] = b;
    }
  }
}

// The entry positions 0..n-1 (the values the sort by row carries along).
__global__ void iota_kernel(uint32_t* out, size_t n) {
  for (size_t p = global_id(); p < n; p += global_stride()) out[p] = static_cast<uint32_t>(p);
}

// Entry p of the row-sorted order is entry e = perm[p] of the input: its sample (the last i with
// offsets[i] <= e, so empty samples are skipped) and its coefficient.
__global__ void sorted_entries_kernel(const uint32_t* perm, size_t entries, const uint64_t* offsets, size_t samples,
                                      const float* coefs, uint32_t* sample, float* coef) {
  for (size_t p = global_id(); p < entries; p += global_stride()) {
    const uint64_t e = perm[p];
    size_t lo = 0, hi = samples;  // offsets[lo] <= e; the answer is in [lo, hi)
    while (lo + 1 < hi) {
      const size_t mid = (lo + hi) / 2;
      if (offsets[mid] <= e)
        lo = mid;
      else
        hi = mid;
    }
    sample[p] = static_cast<uint32_t>(lo);
    coef[p] = coefs[e];
  }
}

// --- softmax cross-entropy ----------------------------------------------------------------------

__global__ void xent_max_kernel(const float* z, const uint64_t* offsets, size_t samples, float* max) {
  for (size_t i = global_id(); i < samples; i += global_stride()) {
    float m = -INFINITY;
    for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) m = (m < z[e]) ? z[e] : m;  // std::max
    max[i] = m;
  }
}

// Sample i's p-th label position: listed, or (positions null) its labels are its first logits.
__device__ uint64_t label_position(const uint32_t* positions, const uint64_t* pos_offsets, size_t i, uint64_t p) {
  return positions != nullptr ? positions[p] : p - pos_offsets[i];
}

__global__ void xent_sums_kernel(const float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
                                 const uint32_t* positions, size_t samples, const float* max, float* sums) {
  for (size_t i = global_id(); i < samples; i += global_stride()) {
    const float* zi = z + offsets[i];
    const size_t nj = offsets[i + 1] - offsets[i];
    double s = 0.0;
    for (size_t j = 0; j < nj; ++j) s += exp(static_cast<double>(zi[j] - max[i]));
    double y = 0.0;
    for (uint64_t p = pos_offsets[i]; p < pos_offsets[i + 1]; ++p) y += zi[label_position(positions, pos_offsets, i, p)];
    sums[i] = static_cast<float>(s);
    sums[samples + i] = static_cast<float>(y);
  }
}

// A block per sample, its threads over the logits. Each logit goes through the CPU's steps in the
// CPU's order (exp(z - max) / sum; then, by one thread, minus w at the labels' positions; then the
// scale), so the bits are those of a serial loop; no sum is split, and the loss is thread 0's.
__global__ void xent_loss_grad_kernel(float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
                                      const uint32_t* positions, const uint64_t* label_offsets, size_t samples,
                                      const float* max, const float* sums, float scale, double* losses) {
  for (size_t i = blockIdx.x; i < samples; i += gridDim.x) {
    float* zi = z + offsets[i];
    const size_t nj = offsets[i + 1] - offsets[i];
    const uint64_t labels = label_offsets[i + 1] - label_offsets[i];
    if (labels == 0) {  // the same for every thread of the block
      for (size_t j = threadIdx.x; j < nj; j += blockDim.x) zi[j] = 0.0f;
      if (threadIdx.x == 0) losses[i] = 0.0;
      continue;
    }
    const float w = 1.0f / static_cast<float>(labels);
    if (threadIdx.x == 0)
      losses[i] = log(static_cast<double>(sums[i])) + max[i] - w * static_cast<double>(sums[samples + i]);
    const float inv = 1.0f / sums[i];
    for (size_t j = threadIdx.x; j < nj; j += blockDim.x) zi[j] = expf(zi[j] - max[i]) * inv;
    __syncthreads();
    if (threadIdx.x == 0)
      for (uint64_t p = pos_offsets[i]; p < pos_offsets[i + 1]; ++p) zi[label_position(positions, pos_offsets, i, p)] -= w;
    __syncthreads();
    if (scale != 1.0f)
      for (size_t j = threadIdx.x; j < nj; j += blockDim.x) zi[j] *= scale;
  }
}

// --- ranking ------------------------------------------------------------------------------------

__device__ bool better(float sa, uint32_t la, float sb, uint32_t lb) { return sa != sb ? sa > sb : la < lb; }

// Inserts (s, label) into the sorted list S/L of `filled` (at most k) entries when it is among the
// k best so far.
__device__ void insert_top(float s, uint32_t label, float* S, uint32_t* L, size_t& filled, size_t k) {
  size_t pos;
  if (filled < k)
    pos = filled++;
  else if (better(s, label, S[k - 1], L[k - 1]))
    pos = k - 1;
  else
    return;
  while (pos > 0 && better(s, label, S[pos - 1], L[pos - 1])) {
    S[pos] = S[pos - 1];
    L[pos] = L[pos - 1];
    --pos;
  }
  S[pos] = s;
  L[pos] = label;
}

// Row i's candidate j's label: listed (ids), or j itself for dense rows.
__device__ uint32_t candidate_label(const uint32_t* ids, uint64_t start, size_t j) {
  return ids != nullptr ? ids[start + j] : static_cast<uint32_t>(j);
}

// The CPU's completion of a row with fewer than k candidates (-inf labels, the smallest ids not
// listed), then the labels made global.
__device__ void complete_top(const uint32_t* ids, uint64_t start, size_t found, uint32_t label_base, size_t k,
                             size_t filled, float* S, uint32_t* L) {
  for (uint32_t j = 0; filled < k; ++j) {
    bool listed = false;
    if (ids != nullptr) {
      for (size_t e = 0; e < found && !listed; ++e) listed = ids[start + e] == j;
    } else {
      listed = j < found;
    }
    if (!listed) {
      S[filled] = -INFINITY;
      L[filled++] = j;
    }
  }
  for (size_t j = 0; j < k; ++j) L[j] += label_base;
}

// One thread per row: insertion into the row's sorted k outputs (labels are distinct, so the order
// is total and the k best are those of the CPU's heap). For k above kTopKMax.
__global__ void top_k_kernel(size_t rows, const float* scores, const uint64_t* offsets, const uint32_t* ids,
                             const float* bias, uint32_t label_base, size_t k, uint32_t* labels, float* out) {
  for (size_t i = global_id(); i < rows; i += global_stride()) {
    const uint64_t start = offsets[i];
    const size_t found = offsets[i + 1] - start;
    float* S = out + i * k;
    uint32_t* L = labels + i * k;
    size_t filled = 0;
    for (size_t j = 0; j < found; ++j) {
      const uint32_t label = candidate_label(ids, start, j);
      insert_top(bias != nullptr ? scores[start + j] + bias[label] : scores[start + j], label, S, L, filled, k);
    }
    complete_top(ids, start, found, label_base, k, filled, S, L);
  }
}

// A block per row (k <= kTopKMax): each thread keeps the k best of its strided share of the
// candidates in shared memory, then thread 0 merges the threads' lists. The order (score, then
// label) is total over distinct labels, so the k best are the same set in the same order however
// the candidates are shared out: the one-thread-per-row kernel's results, bit for bit, with every
// thread of the block scanning (a row of a million labels was one thread's serial scan).
constexpr unsigned kTopKThreads = 128;
constexpr size_t kTopKMax = 32;

__global__ void __launch_bounds__(kTopKThreads)
    top_k_block_kernel(size_t rows, const float* scores, const uint64_t* offsets, const uint32_t* ids,
                       const float* bias, uint32_t label_base, size_t k, uint32_t* labels, float* out) {
  __shared__ float best_s[kTopKThreads * kTopKMax];
  __shared__ uint32_t best_l[kTopKThreads * kTopKMax];
  __shared__ uint32_t best_n[kTopKThreads];
  for (size_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const uint64_t start = offsets[i];
    const size_t found = offsets[i + 1] - start;
    float* S = best_s + threadIdx.x * kTopKMax;
    uint32_t* L = best_l + threadIdx.x * kTopKMax;
    size_t filled = 0;
    for (size_t j = threadIdx.x; j < found; j += blockDim.x) {
      const uint32_t label = candidate_label(ids, start, j);
      insert_top(bias != nullptr ? scores[start + j] + bias[label] : scores[start + j], label, S, L, filled, k);
    }
    best_n[threadIdx.x] = static_cast<uint32_t>(filled);
    __syncthreads();
    if (threadIdx.x == 0) {
      float* OS = out + i * k;
      uint32_t* OL = labels + i * k;
      size_t merged = 0;
      for (unsigned t = 0; t < blockDim.x; ++t)
        for (uint32_t c = 0; c < best_n[t]; ++c)
          insert_top(best_s[t * kTopKMax + c], best_l[t * kTopKMax + c], OS, OL, merged, k);
      complete_top(ids, start, found, label_base, k, merged, OS, OL);
    }
    __syncthreads();  // the lists are rewritten for the block's next row
  }
}

// --- optimizers ---------------------------------------------------------------------------------

// Element idx of an update is column idx % cols of row rows[idx / cols] of the whole matrices w, m,
// v (their device copies); the gradient is the listed rows, gathered.
__device__ size_t row_of(const OptimRows& r, size_t j) { return r.rows != nullptr ? r.rows[j] : j; }
__device__ size_t element(const OptimRows& r, size_t idx) { return row_of(r, idx / r.cols) * r.cols + idx % r.cols; }
// The 32 random bits of a bf16 element's rounding (unused for f32 storage).
__device__ uint32_t rounding_bits(const OptimRows& r, size_t idx) {
  if (!r.bf16) return 0u;
  const uint32_t key = rounding_row_key(r.round_seed, r.row_base + row_of(r, idx / r.cols));
  return rounding_column_hash(key, r.col_base + static_cast<uint32_t>(idx % r.cols));
}

// One thread per element of the listed rows: the catch-up, then the step (kernels/optim_ops.cpp),
// in f32 on the widened values; bf16 storage rounds as kernels/vector_ops.cpp's narrow_bf16_state
// (w and v stochastically, Adam's m to nearest).
template <class S>
__global__ void adam_kernel(OptimRows r) {
  S* W = static_cast<S*>(r.w);
  S* M = static_cast<S*>(r.m);
  S* V = static_cast<S*>(r.v);
  const size_t total = r.n * r.cols;
  for (size_t idx = global_id(); idx < total; idx += global_stride()) {
    const size_t j = idx / r.cols, at = element(r, idx);
    float w = load(W, at), m = load(M, at), v = load(V, at);
    if (r.has_plan != nullptr && r.has_plan[j] != 0) {
      const float* p = r.plan + 4 * j;
      const float root_v = sqrtf(v);
      float sum = 0.0f;
      for (uint32_t s = r.term_start[j]; s < r.term_start[j + 1]; ++s)
        sum += r.terms[2 * s] / (r.terms[2 * s + 1] * root_v + r.eps);
      w = p[0] * w - sum * m;
      m *= p[2];
      v *= p[3];
    }
    if (r.grad != nullptr) {
      const float g = r.grad[idx];
      const uint32_t count = r.counts != nullptr ? r.counts[j] : r.count_all;
      const bool frozen = r.freeze_after > 0 && count > r.freeze_after;
      const float step = r.lr * r.corrections[2 * size_t{count}];
      const float c2 = r.corrections[2 * size_t{frozen ? r.freeze_after : count} + 1];
      m = r.beta1 * m + (1.0f - r.beta1) * g;
      if (frozen) {  // kernels/optim_ops.cpp's adam_row_frozen
        const float floor = (1.0f - r.beta2) / r.corrections[2 * size_t{r.freeze_after} + 1];
        v = (v < floor * g * g) ? floor * g * g : v;  // std::max: a NaN v stays NaN
      } else {
        v = r.beta2 * v + (1.0f - r.beta2) * g * g;
      }
      w = r.keep * w - step * m / (sqrtf(v * c2) + r.eps);
    }
    const uint32_t bits = rounding_bits(r, idx);
    store_stochastic(W, at, w, bits & 0xffffu);
    store_nearest(M, at, m);
    store_stochastic(V, at, v, bits >> 16);
  }
}

template <class S>
__global__ void sgd_kernel(OptimRows r) {
  S* W = static_cast<S*>(r.w);
  S* M = static_cast<S*>(r.m);
  const size_t total = r.n * r.cols;
  for (size_t idx = global_id(); idx < total; idx += global_stride()) {
    const size_t j = idx / r.cols, at = element(r, idx);
    float w = load(W, at), m = load(M, at);
    if (r.has_plan != nullptr && r.has_plan[j] != 0) {
      const float* p = r.plan + 4 * j;
      w = p[0] * w - p[1] * m;
      m *= p[2];
    }
    if (r.grad != nullptr) {
      m = r.momentum * m + r.grad[idx];
      w = r.keep * w - r.lr * m;
    }
    const uint32_t bits = rounding_bits(r, idx);
    store_stochastic(W, at, w, bits & 0xffffu);
    store_stochastic(M, at, m, bits >> 16);
  }
}

// Adagrad's catch-up is weight decay only (plan[0]); its accumulator is kept.
template <class S>
__global__ void adagrad_kernel(OptimRows r) {
  S* W = static_cast<S*>(r.w);
  S* M = static_cast<S*>(r.m);
  const size_t total = r.n * r.cols;
  for (size_t idx = global_id(); idx < total; idx += global_stride()) {
    const size_t j = idx / r.cols, at = element(r, idx);
    float w = load(W, at), acc = load(M, at);
    if (r.has_plan != nullptr && r.has_plan[j] != 0) w *= r.plan[4 * j];
    if (r.grad != nullptr) {
      const float g = r.grad[idx];
      acc += g * g;
      w = r.keep * w - r.lr * g / (sqrtf(acc) + r.eps);
    }
    const uint32_t bits = rounding_bits(r, idx);
    store_stochastic(W, at, w, bits & 0xffffu);
    store_stochastic(M, at, acc, bits >> 16);
  }
}

// Row-wise Adagrad, 1: a thread per listed row raises its accumulator (one f32 per row of the whole
// parameter) by the row's mean square (core/rowwise.h's order) and keeps the row's step size.
__global__ void rowwise_accumulate_kernel(OptimRows r, float* steps) {
  float* acc = static_cast<float*>(r.m);
  for (size_t j = global_id(); j < r.n; j += global_stride()) {
    const size_t row = row_of(r, j);
    const float a = acc[row] + rowwise_mean_square(r.grad + j * r.cols, r.cols);
    acc[row] = a;
    steps[j] = r.lr / (sqrtf(a) + r.eps);
  }
}

// 2: every element: the catch-up's decay, then the row's step (bf16 weights rounded as the CPU's
// narrow_bf16_stochastic: the hash's high 16 bits).
template <class S>
__global__ void rowwise_step_kernel(OptimRows r, const float* steps) {
  S* W = static_cast<S*>(r.w);
  const size_t total = r.n * r.cols;
  for (size_t idx = global_id(); idx < total; idx += global_stride()) {
    const size_t j = idx / r.cols, at = element(r, idx);
    float w = load(W, at);
    if (r.has_plan != nullptr && r.has_plan[j] != 0) w *= r.plan[4 * j];
    if (r.grad != nullptr) w = r.keep * w - steps[j] * r.grad[idx];
    store_stochastic(W, at, w, rounding_bits(r, idx) >> 16);
  }
}

// Row-wise Adam, 1: a thread per listed row: the catch-up's move (from v before its decay), v's decay
// and step, the row's step size (kernels/optim_ops.cpp's rowwise_adam_rows, the same order).
__global__ void rowwise_adam_rows_kernel(OptimRows r, float* moves, float* steps) {
  float* V = static_cast<float*>(r.v);
  for (size_t j = global_id(); j < r.n; j += global_stride()) {
    const size_t row = row_of(r, j);
    float v = V[row], move = 0.0f;
    if (r.has_plan != nullptr && r.has_plan[j] != 0) {
      const float root_v = sqrtf(v);
      for (uint32_t s = r.term_start[j]; s < r.term_start[j + 1]; ++s)
        move += r.terms[2 * s] / (r.terms[2 * s + 1] * root_v + r.eps);
      v *= r.plan[4 * j + 3];
    }
    float step = 0.0f;
    if (r.grad != nullptr) {
      const uint32_t count = r.counts != nullptr ? r.counts[j] : r.count_all;
      v = r.beta2 * v + (1.0f - r.beta2) * rowwise_mean_square(r.grad + j * r.cols, r.cols);
      const float rate = r.m != nullptr ? r.lr * r.corrections[2 * size_t{count}] : r.lr;
      step = rate / (sqrtf(v * r.corrections[2 * size_t{count} + 1]) + r.eps);
    }
    V[row] = v;
    moves[j] = move;
    steps[j] = step;
  }
}

// 2: every element: the catch-up (w = decay w - move m, m *= m_decay), then the step (bf16: w
// stochastically with the hash's high 16 bits, m to nearest).
template <class S>
__global__ void rowwise_adam_step_kernel(OptimRows r, const float* moves, const float* steps) {
  S* W = static_cast<S*>(r.w);
  S* M = static_cast<S*>(r.m);
  const size_t total = r.n * r.cols;
  for (size_t idx = global_id(); idx < total; idx += global_stride()) {
    const size_t j = idx / r.cols, at = element(r, idx);
    float w = load(W, at), m = M != nullptr ? load(M, at) : 0.0f;
    if (r.has_plan != nullptr && r.has_plan[j] != 0) {
      const float* p = r.plan + 4 * j;
      if (M != nullptr) {
        w = p[0] * w - moves[j] * m;
        m *= p[2];
      } else {
        w *= p[0];
      }
    }
    if (r.grad != nullptr) {
      const float g = r.grad[idx];
      if (M != nullptr) {
        m = r.beta1 * m + (1.0f - r.beta1) * g;
        w = r.keep * w - steps[j] * m;
      } else {
        w = r.keep * w - steps[j] * g;
      }
    }
    store_stochastic(W, at, w, rounding_bits(r, idx) >> 16);
    if (M != nullptr) store_nearest(M, at, m);
  }
}

// Row i of candidates in rows of `width`: offsets[i] = i * width (top_k's dense rows as CSR).
__global__ void dense_offsets_kernel(size_t rows, size_t width, uint64_t* offsets) {
  for (size_t i = global_id(); i <= rows; i += global_stride()) offsets[i] = i * width;
}

// --- LSH ----------------------------------------------------------------------------------------

// rows (null: 0..n-1): which rows of x are hashed.
__device__ size_t listed(const uint32_t* rows, size_t j) { return rows != nullptr ? rows[j] : j; }

template <class X>
__global__ void simhash_kernel(const float* planes, size_t tables, int k, const X* x, const uint32_t* rows,
                               size_t n, size_t dim, uint32_t* codes) {
  for (size_t idx = global_id(); idx < n * tables; idx += global_stride()) {
    const size_t j = idx / tables, t = idx % tables;
    const X* v = x + listed(rows, j) * dim;
    uint32_t code = 0;
    for (int b = 0; b < k; ++b) code = (code << 1) | (dot16(planes + (t * k + b) * dim, v, dim) > 0.0f ? 1u : 0u);
    codes[idx] = code;
  }
}

// Winner of every (row, bin): the position of its largest positive value, -1 for none.
template <class X>
__global__ void dwta_winners_kernel(const uint32_t* coords, size_t bins, int bin_size, const X* x,
                                    const uint32_t* rows, size_t n, size_t dim, int32_t* winners) {
  for (size_t idx = global_id(); idx < n * bins; idx += global_stride()) {
    const size_t j = idx / bins, b = idx % bins;
    const uint32_t* c = coords + b * bin_size;
    const X* v = x + listed(rows, j) * dim;
    float best = 0.0f;
    int32_t arg = -1;
    for (int i = 0; i < bin_size; ++i)
      if (load(v, c[i]) > best) {
        best = load(v, c[i]);
        arg = i;
      }
    winners[idx] = arg;
  }
}

__global__ void dwta_codes_kernel(DwtaParams p, const int32_t* winners, size_t n, uint32_t* codes) {
  const size_t bins = p.tables * p.k;
  for (size_t idx = global_id(); idx < n * p.tables; idx += global_stride()) {
    const size_t j = idx / p.tables, t = idx % p.tables;
    const int32_t* win = winners + j * bins;
    uint64_t code = 0;
    for (int i = 0; i < p.k; ++i) {
      const size_t b = t * p.k + i;
      int32_t w = win[b];
      for (int attempt = 1; w < 0 && attempt <= 64; ++attempt)
        w = win[mix32(p.seed ^ (b * 0x9e3779b97f4a7c15ULL) ^ static_cast<uint64_t>(attempt)) % bins];
      code = (code << p.bin_bits) | static_cast<uint64_t>(w < 0 ? 0 : w);
    }
    codes[idx] = (p.k * p.bin_bits <= p.max_bucket_bits)
                     ? static_cast<uint32_t>(code)
                     : mix32(code * 0x9e3779b97f4a7c15ULL + t) & ((1u << p.bucket_bits) - 1);
  }
}

// Rounds to bf16 (to nearest, ties to even: __float2bfloat16_rn) for the tensor-core products.
__global__ void to_bf16_kernel(const float* x, size_t n, __nv_bfloat16* y) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

// core/bucket_union.h's program, one block per sample, a barrier between phases. Shared memory:
// the keys (slots_max), then the tables' starts (tables + 1), then one run counter per thread.
constexpr uint32_t kUnionThreads = 512;

__global__ void __launch_bounds__(kUnionThreads)
    bucket_union_kernel(bucket_union::FlatTables tables, uint32_t nt, const uint32_t* codes,
                        const uint64_t* label_offsets, const uint32_t* labels, uint64_t cap, uint32_t slots_max,
                        const uint64_t* out_start, uint32_t* out, uint32_t* counts) {
  namespace bu = bucket_union;
  extern __shared__ uint64_t smem[];
  __shared__ bu::Block b;
  const size_t i = blockIdx.x;
  const uint32_t tid = threadIdx.x, threads = blockDim.x;
  const bu::Problem<bu::FlatTables> p{tables,
                                      nt,
                                      codes + i * nt,
                                      labels + label_offsets[i],
                                      static_cast<uint32_t>(label_offsets[i + 1] - label_offsets[i]),
                                      cap,
                                      out + out_start[i]};
  if (tid == 0) {
    b.keys = smem;
    b.table_start = reinterpret_cast<uint32_t*>(smem + slots_max);
    b.runs = b.table_start + nt + 1;
  }
  __syncthreads();
  bu::sizes(p, b, tid, threads);
  __syncthreads();
  if (tid == 0) bu::start(p, b);
  __syncthreads();
  bu::fill(p, b, tid, threads);
  __syncthreads();
  const auto sort = [&] {
    for (uint32_t k = 2; k <= b.slots; k <<= 1)
      for (uint32_t j = k >> 1; j > 0; j >>= 1) {
        bu::sort_step(b, k, j, tid, threads);
        __syncthreads();
      }
  };
  sort();
  bu::count_runs(b, tid, threads);
  __syncthreads();
  uint64_t local[bu::kMaxItems];
  bu::records(p, b, tid, threads, local);
  __syncthreads();
  bu::store(b, tid, threads, local);
  __syncthreads();
  sort();
  bu::output(p, b, tid, threads);
  __syncthreads();
  if (tid == 0) counts[i] = b.count;
}

// Sample i's count[i] ids from its region of the kernel's output to its place in the result.
template <class T>
__global__ void compact_kernel(size_t samples, const uint64_t* from, const uint64_t* to, const T* src, T* dst) {
  for (size_t i = blockIdx.x; i < samples; i += gridDim.x)
    for (uint64_t e = threadIdx.x; e < to[i + 1] - to[i]; e += blockDim.x) dst[to[i] + e] = src[from[i] + e];
}

// Sample i's bucket entries (its tables' buckets for its codes) into scanned (when given), and the
// room its union needs (its labels and every entry) into region[i]; region[samples] = 0 (for the
// exclusive sum that follows).
__global__ void union_regions_kernel(bucket_union::FlatTables tables, uint32_t nt, const uint32_t* codes,
                                     const uint64_t* label_offsets, size_t samples, uint64_t* scanned,
                                     uint64_t* region) {
  for (size_t i = global_id(); i <= samples; i += global_stride()) {
    if (i == samples) {
      region[i] = 0;
      continue;
    }
    uint64_t entries = 0;
    for (uint32_t t = 0; t < nt; ++t) {
      uint32_t size = 0;
      tables.bucket(t, codes[i * nt + t], size);
      entries += size;
    }
    if (scanned != nullptr) scanned[i] = entries;
    region[i] = label_offsets[i + 1] - label_offsets[i] + entries;
  }
}

// counts (u32, samples) widened into sizes (u64, samples + 1, the last 0) for an exclusive sum.
__global__ void widen_counts_kernel(const uint32_t* counts, size_t samples, uint64_t* sizes) {
  for (size_t i = global_id(); i <= samples; i += global_stride()) sizes[i] = i < samples ? counts[i] : 0;
}

// Chunk c's sum of squares (core/backend.h's kSquaresChunk order), in double.
__global__ void chunk_squares_kernel(const float* x, size_t n, size_t chunk, double* sums) {
  const size_t chunks = (n + chunk - 1) / chunk;
  for (size_t c = global_id(); c < chunks; c += global_stride()) {
    double s = 0.0;
    const size_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
    for (size_t i = c * chunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    sums[c] = s;
  }
}

// The chunks' sums added in order by one thread (as the CPU adds them).
__global__ void ordered_sum_kernel(const double* sums, size_t n, double* total) {
  if (global_id() != 0) return;
  double s = 0.0;
  for (size_t c = 0; c < n; ++c) s += sums[c];
  *total = s;
}

__global__ void scale_kernel(float* x, size_t n, float factor) {
  for (size_t i = global_id(); i < n; i += global_stride()) x[i] *= factor;
}

// Table t's column of the neurons' codes (codes: neurons x tables) as sort keys, the neuron ids as values.
__global__ void table_keys_kernel(const uint32_t* codes, size_t n, size_t nt, size_t t, uint32_t* keys,
                                  uint32_t* rows) {
  for (size_t i = global_id(); i < n; i += global_stride()) {
    keys[i] = codes[i * nt + t];
    rows[i] = static_cast<uint32_t>(i);
  }
}

// Per bucket, its neurons (sorted keys); counts has buckets + 1 entries, zeroed before.
__global__ void bucket_counts_kernel(const uint32_t* keys, size_t n, uint32_t* counts) {
  for (size_t i = global_id(); i < n; i += global_stride()) atomicAdd(&counts[keys[i]], 1u);
}

// Per bucket b (rows[starts[b] .. starts[b + 1]), ascending), what it keeps (core/bucket_build.h),
// into kept[b]; kept[buckets] = 0 (for the exclusive sum that follows).
__global__ void bucket_keep_kernel(uint32_t* rows, const uint32_t* starts, uint32_t buckets, uint64_t capacity,
                                   uint64_t seed, uint64_t t, uint32_t* kept) {
  for (size_t b = global_id(); b <= buckets; b += global_stride())
    kept[b] = b == buckets ? 0
                           : static_cast<uint32_t>(bucket_build::keep(rows + starts[b], starts[b + 1] - starts[b],
                                                                      capacity, seed, t, b));
}

// Bucket b's kept rows to its place in the table's ids.
__global__ void bucket_place_kernel(const uint32_t* rows, const uint32_t* starts, const uint32_t* offsets,
                                    uint32_t buckets, uint32_t* ids) {
  for (size_t b = blockIdx.x; b < buckets; b += gridDim.x)
    for (uint32_t e = threadIdx.x; e < offsets[b + 1] - offsets[b]; e += blockDim.x)
      ids[offsets[b] + e] = rows[starts[b] + e];
}

// The room sample i's extended set needs (active_extend::room_needed); region[samples] = 0.
__global__ void extend_regions_kernel(active_extend::Spec spec, const uint64_t* offsets, size_t samples,
                                      uint64_t* region) {
  for (size_t i = global_id(); i <= samples; i += global_stride())
    region[i] = i < samples ? active_extend::room_needed(spec, offsets[i + 1] - offsets[i]) : 0;
}

// core/active_extend.h's program, a thread per sample: its members copied to its region, then the
// top-up and the draws, membership by a search of the region (the sets are a few thousand at most).
__global__ void extend_kernel(active_extend::Spec spec, const uint64_t* in_offsets, const uint32_t* in_ids,
                              size_t samples, const uint64_t* start, uint32_t* out, float* out_offsets,
                              uint32_t* drawn, uint32_t* counts) {
  for (size_t i = global_id(); i < samples; i += global_stride()) {
    uint32_t* ids = out + start[i];
    const uint64_t n = in_offsets[i + 1] - in_offsets[i];
    for (uint64_t e = 0; e < n; ++e) ids[e] = in_ids[in_offsets[i] + e];
    const auto is_member = [ids](uint32_t id, uint64_t count) {
      for (uint64_t e = 0; e < count; ++e)
        if (ids[e] == id) return true;
      return false;
    };
    counts[i] = static_cast<uint32_t>(active_extend::extend(
        spec, i, ids, n, out_offsets != nullptr ? out_offsets + start[i] : nullptr, drawn + i * spec.draws, is_member,
        [](uint32_t* v, uint64_t m) { active_extend::insertion_sort(v, m); }));
  }
}

// The program's marks over the state's flags: the thread that sets a flag counts it.
struct DeviceFlagMarks {
  uint32_t* relevant_flags;
  uint32_t* covered_flags;
  unsigned long long* counts;
  size_t labels, num_ks;  // labels = 32 x the words of one k's flags
  __device__ static void set(uint32_t* flags, uint32_t l, unsigned long long* count) {
    const uint32_t bit = 1u << (l % 32);
    if ((atomicOr(flags + l / 32, bit) & bit) == 0u) atomicAdd(count, 1ull);
  }
  __device__ void relevant(uint32_t l) const {
    if (l < labels) set(relevant_flags, l, counts + num_ks);
  }
  __device__ void covered(uint64_t q, uint32_t t) const {
    if (t < labels) set(covered_flags + q * (labels / 32), t, counts + q);
  }
};

// core/ranking_counts.h's program, a thread per point; its labels (and weights) sorted in its part of
// the scratch (the labels' own positions).
__global__ void ranking_point_kernel(ranking::Spec spec, const uint32_t* top, size_t rows, size_t width,
                                     const uint64_t* offsets, const uint32_t* labels, uint32_t* truth,
                                     double* weights, double* shares, DeviceFlagMarks marks) {
  const size_t cols = spec.num_ks * ranking::kSums;
  for (size_t i = global_id(); i < rows; i += global_stride()) {
    const uint64_t first = offsets[i] - offsets[0], n = offsets[i + 1] - offsets[i];
    uint32_t* t = truth + first;
    for (uint64_t e = 0; e < n; ++e) t[e] = labels[offsets[i] + e];
    const uint64_t m = ranking::sort_unique(t, n);
    double* w = nullptr;
    if (spec.inverse != nullptr) {
      w = weights + first;
      for (uint64_t e = 0; e < m; ++e) w[e] = spec.weight(t[e]);
      ranking::sort_descending(w, m);
    }
    ranking::point(spec, t, m, w, top + i * width, width, shares + i * cols, marks);
  }
}

// sums[c] += shares[i][c], point by point: a thread per sum keeps the host's order.
__global__ void ranking_sum_kernel(const double* shares, size_t rows, size_t cols, double* sums) {
  for (size_t c = global_id(); c < cols; c += global_stride())
    for (size_t i = 0; i < rows; ++i) sums[c] += shares[i * cols + c];
}

}  // namespace


// --- the entry points -----------------------------------------------------------------------------

Context* context_create() {
  auto ctx = std::make_unique<Context>();
  FRUGAL_CUDA(cudaSetDevice(ctx->device));
  FRUGAL_CUDA(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  FRUGAL_CUDA(cudaEventCreateWithFlags(&ctx->pinned_free, cudaEventDisableTiming));
  FRUGAL_CUBLAS(cublasCreate(&ctx->blas));
  FRUGAL_CUBLAS(cublasSetStream(ctx->blas, ctx->stream));
  // Full fp32: no TF32 or other reduced-precision shortcut, whatever the environment says.
  FRUGAL_CUBLAS(cublasSetMathMode(ctx->blas, CUBLAS_PEDANTIC_MATH));
  return ctx.release();
}

void context_destroy(Context* ctx) noexcept {
  if (ctx == nullptr) return;
  // At process exit the runtime may be gone already: errors are ignored here.
  for (Buffer& b : ctx->slots)
    if (b.p != nullptr) (void)cudaFree(b.p);
  for (Buffer& b : ctx->pinned)
    if (b.p != nullptr) (void)cudaFreeHost(b.p);
  if (ctx->blas != nullptr) (void)cublasDestroy(ctx->blas);
  if (ctx->pinned_free != nullptr) (void)cudaEventDestroy(ctx->pinned_free);
  if (ctx->stream != nullptr) (void)cudaStreamDestroy(ctx->stream);
  delete ctx;
}

void synchronize(Context& ctx) {
  FRUGAL_CUDA(cudaSetDevice(ctx.device));
  FRUGAL_CUDA(cudaStreamSynchronize(ctx.stream));
  ctx.pinned_busy = false;
}

void* device_alloc(Context& ctx, size_t bytes) {
  FRUGAL_CUDA(cudaSetDevice(ctx.device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error state
    size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    fail(__FILE__, __LINE__, "cudaMalloc",
         "no room on the device for " + std::to_string(bytes) + " bytes (" + std::to_string(free) + " of " +
             std::to_string(total) + " bytes free): " + cudaGetErrorString(e));
  }
  return p;
}

void device_free(void* p) noexcept {
  if (p != nullptr) (void)cudaFree(p);  // at process exit the runtime may be gone: ignored
}

size_t free_bytes(Context& ctx) {
  FRUGAL_CUDA(cudaSetDevice(ctx.device));
  size_t free = 0, total = 0;
  FRUGAL_CUDA(cudaMemGetInfo(&free, &total));
  return free;
}

void set(Context& ctx, void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  Staging st(ctx, "set");
  st.up_to(static_cast<std::byte*>(device), static_cast<const std::byte*>(host), bytes);
}

void get(Context& ctx, void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  Staging st(ctx, "get");
  st.down(static_cast<std::byte*>(host), static_cast<const std::byte*>(device), bytes);
  st.finish();
}

void copy(Context& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  Staging st(ctx, "copy");
  ctx.device_bytes.fetch_add(bytes, std::memory_order_relaxed);
  FRUGAL_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st.stream()));
}

void clear(Context& ctx, void* device, size_t bytes) {
  if (bytes == 0) return;
  FRUGAL_CUDA(cudaSetDevice(ctx.device));
  FRUGAL_CUDA(cudaMemsetAsync(device, 0, bytes, ctx.stream));
}

Crossed crossed(const Context& ctx) {
  return {ctx.up_bytes.load(), ctx.up_calls.load(), ctx.down_bytes.load(), ctx.down_calls.load(),
          ctx.device_bytes.load()};
}

void matmul(Context& ctx, const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n,
            int64_t k, bool accumulate, bool bf16) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C stays (accumulate) or becomes 0
    if (!accumulate) clear(ctx, c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  constexpr int64_t kMax = 0x7fffffff;
  FRUGAL_CHECK(m <= kMax && n <= kMax && k <= kMax, "CUDA backend: matmul dimensions beyond cuBLAS's int range");
  Staging st(ctx, __func__);
  // Row-major C (m x n) is column-major C^T (n x m) = op(B)^T op(A)^T: a row-major matrix read as
  // column-major is its transpose, so B goes first and each operand's flag is its own.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = static_cast<int>(trans_b ? k : n), lda = static_cast<int>(trans_a ? m : k);
  if (bf16) {
    const size_t na = static_cast<size_t>(m * k), nb = static_cast<size_t>(k * n);
    auto* a16 = st.alloc<__nv_bfloat16>(na);
    auto* b16 = st.alloc<__nv_bfloat16>(nb);
    to_bf16_kernel<<<blocks_for(na), kThreads, 0, st.stream()>>>(a, na, a16);
    FRUGAL_LAUNCHED();
    to_bf16_kernel<<<blocks_for(nb), kThreads, 0, st.stream()>>>(b, nb, b16);
    FRUGAL_LAUNCHED();
    // The pedantic mode the context keeps for fp32 would forbid the tensor-core algorithms.
    FRUGAL_CUBLAS(cublasSetMathMode(ctx.blas, CUBLAS_DEFAULT_MATH));
    const cublasStatus_t status =
        cublasGemmEx(ctx.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                     b16, CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, &beta, c, CUDA_R_32F, static_cast<int>(n),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    FRUGAL_CUBLAS(cublasSetMathMode(ctx.blas, CUBLAS_PEDANTIC_MATH));
    FRUGAL_CUBLAS(status);
  } else {
    FRUGAL_CUBLAS(cublasSgemm(ctx.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                              &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n)));
  }
}

void bias_act_forward(Context& ctx, float* y, size_t rows, size_t cols, const float* bias, bool relu) {
  const size_t n = rows * cols;
  if (n == 0) return;
  Staging st(ctx, __func__);
  bias_act_kernel<<<blocks_for(n), kThreads, 0, st.stream()>>>(y, n, cols, bias, relu);
  FRUGAL_LAUNCHED();
}

void bias_act_backward(Context& ctx, float* grad, const float* y, size_t rows, size_t cols, bool relu,
                       float* bias_grad) {
  const size_t n = rows * cols;
  if (cols == 0) return;
  Staging st(ctx, __func__);
  if (relu && n > 0) {
    relu_mask_kernel<<<blocks_for(n), kThreads, 0, st.stream()>>>(grad, y, n);
    FRUGAL_LAUNCHED();
  }
  column_sums_kernel<<<blocks_for(cols), kThreads, 0, st.stream()>>>(grad, rows, cols, bias_grad);
  FRUGAL_LAUNCHED();
}

void sparse_forward(Context& ctx, const uint64_t* offsets, size_t points, const uint32_t* ids, const float* vals,
                    Matrix w, size_t h, const float* bias, bool relu, float* out) {
  if (points == 0 || h == 0) return;
  Staging st(ctx, __func__);
  if (w.bf16)
    sparse_forward_kernel<<<blocks_for(points, 1), kThreads, 0, st.stream()>>>(
        offsets, points, ids, vals, static_cast<const uint16_t*>(w.p), h, bias, relu, out);
  else
    sparse_forward_kernel<<<blocks_for(points, 1), kThreads, 0, st.stream()>>>(
        offsets, points, ids, vals, static_cast<const float*>(w.p), h, bias, relu, out);
  FRUGAL_LAUNCHED();
}

// sample[e] = i for sample i's entries e: one thread per sample (active_logits' per-entry threads
// need their sample).
__global__ void entry_samples_kernel(const uint64_t* offsets, size_t samples, uint32_t* sample) {
  for (size_t i = global_id(); i < samples; i += global_stride())
    for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) sample[e] = static_cast<uint32_t>(i);
}

void active_logits(Context& ctx, const float* h, size_t d, const uint64_t* offsets, size_t samples,
                   const uint32_t* ids, size_t entries, Matrix w, const float* bias, const float* logit_offsets,
                   float* logits) {
  if (entries == 0) return;
  Staging st(ctx, __func__);
  uint32_t* dsample = st.alloc<uint32_t>(entries);
  entry_samples_kernel<<<blocks_for(samples), kThreads, 0, st.stream()>>>(offsets, samples, dsample);
  FRUGAL_LAUNCHED();
  if (w.bf16)
    active_logits_kernel<<<blocks_for(entries), kThreads, 0, st.stream()>>>(
        h, d, dsample, ids, entries, static_cast<const uint16_t*>(w.p), bias, logit_offsets, logits);
  else
    active_logits_kernel<<<blocks_for(entries), kThreads, 0, st.stream()>>>(
        h, d, dsample, ids, entries, static_cast<const float*>(w.p), bias, logit_offsets, logits);
  FRUGAL_LAUNCHED();
}

void active_backward(Context& ctx, const uint64_t* offsets, size_t samples, const uint32_t* ids,
                     const float* dlogits, Matrix w, size_t d, float* grad_h) {
  if (samples == 0 || d == 0) return;
  Staging st(ctx, __func__);
  if (w.bf16)
    active_backward_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(
        offsets, samples, ids, dlogits, static_cast<const uint16_t*>(w.p), d, grad_h);
  else
    active_backward_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(
        offsets, samples, ids, dlogits, static_cast<const float*>(w.p), d, grad_h);
  FRUGAL_LAUNCHED();
}

void row_accumulate(Context& ctx, const RowEntries& in, const float* coefs, size_t num_rows, const float* vecs,
                    size_t d, std::vector<uint32_t>& rows, const std::function<RowSumsOut(size_t)>& prepare) {
  const size_t entries = in.entries, samples = in.samples;
  if (!in.rows_listed) rows.clear();
  FRUGAL_CHECK(!in.rows_listed || rows.size() <= entries,
               "CUDA backend: more listed rows than the batch has entries");
  if (entries == 0) {
    prepare(0);
    return;
  }
  FRUGAL_CHECK(entries <= 0x7fffffffu, "CUDA backend: row accumulation of more than 2^31 - 1 entries");
  const int n = static_cast<int>(entries);
  // Radix digits up to the largest row id only (17 bits for 100k rows: three passes, not four).
  int end_bit = 1;
  while (end_bit < 32 && (size_t{1} << end_bit) < num_rows) ++end_bit;
  Staging st(ctx, __func__);
  const uint32_t* dids = st.up_or_device(in.ids, entries, in.on_device);
  const uint64_t* doff = st.up_or_device(in.offsets, samples + 1, in.on_device);
  uint32_t* dpos = st.alloc<uint32_t>(entries);
  uint32_t* dkeys = st.alloc<uint32_t>(entries);
  uint32_t* dperm = st.alloc<uint32_t>(entries);
  uint32_t* drows = st.alloc<uint32_t>(entries);
  int* dcounts = st.alloc<int>(entries + 1);
  int* druns = st.alloc<int>(1);
  uint64_t* dstart = st.alloc<uint64_t>(entries + 1);
  // CUB's scratch: the largest of the three steps' (the scan's for entries + 1 items bounds its
  // need for the nrows + 1 it gets).
  size_t sort_bytes = 0, encode_bytes = 0, scan_bytes = 0;
  FRUGAL_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, dids, dkeys, dpos, dperm, n, 0, end_bit, st.stream()));
  FRUGAL_CUDA(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, dkeys, drows, dcounts, druns, n, st.stream()));
  FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, dcounts, dstart, n + 1, st.stream()));
  size_t scratch_bytes = std::max({sort_bytes, encode_bytes, scan_bytes});
  void* scratch = st.alloc<std::byte>(scratch_bytes);
  // 1. The entries sorted by row; the sort is stable, so within a row they stay in input order
  // (sample order), the order the CPU's RowAccumulator sums them in.
  iota_kernel<<<blocks_for(entries), kThreads, 0, st.stream()>>>(dpos, entries);
  FRUGAL_LAUNCHED();
  FRUGAL_CUDA(cub::DeviceRadixSort::SortPairs(scratch, sort_bytes, dids, dkeys, dpos, dperm, n, 0, end_bit, st.stream()));
  // 2. The distinct rows (ascending) and their entry counts.
  FRUGAL_CUDA(cub::DeviceRunLengthEncode::Encode(scratch, encode_bytes, dkeys, drows, dcounts, druns, n, st.stream()));
  // How many rows: the caller's list says it, or the count comes down (a wait for the device).
  size_t nrows = rows.size();
  if (!in.rows_listed) {
    int nruns = 0;
    st.down(&nruns, druns, 1);
    st.finish();
    nrows = static_cast<size_t>(nruns);
  }
  // 3. Each row's first entry: the counts' exclusive sum, with a zero count after the last row so
  // that row_start[nrows] = entries.
  FRUGAL_CUDA(cudaMemsetAsync(dcounts + nrows, 0, sizeof(int), st.stream()));
  scan_bytes = scratch_bytes;
  FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(scratch, scan_bytes, dcounts, dstart, static_cast<int>(nrows + 1),
                                            st.stream()));
  // 4. Each sorted entry's sample and coefficient, then a block per row sums them in order.
  uint32_t* dsample = st.alloc<uint32_t>(entries);
  float* dcoef = st.alloc<float>(entries);
  sorted_entries_kernel<<<blocks_for(entries), kThreads, 0, st.stream()>>>(dperm, entries, doff, samples, coefs,
                                                                           dsample, dcoef);
  FRUGAL_LAUNCHED();
  const RowSumsOut out = prepare(nrows);
  if (nrows > 0)
    row_sums_kernel<<<blocks_for(nrows, 1), kThreads, 0, st.stream()>>>(dstart, nrows, dsample, dcoef, vecs, d,
                                                                        out.values, out.bias);
  FRUGAL_LAUNCHED();
  if (in.rows_listed) {
    // The device's list stays on the device, where the optimizer reads it.
    if (nrows > 0 && out.row_ids != nullptr)
      FRUGAL_CUDA(cudaMemcpyAsync(out.row_ids, drows, nrows * sizeof(uint32_t), cudaMemcpyDeviceToDevice,
                                  st.stream()));
    return;
  }
  // The row list is host memory (core/backend.h's RowGrad): it comes down, unless it stays on the
  // device (rows_stay); the sums stay, and so does the device's list where prepare gave it a place.
  if (nrows > 0 && out.row_ids != nullptr)
    FRUGAL_CUDA(cudaMemcpyAsync(out.row_ids, drows, nrows * sizeof(uint32_t), cudaMemcpyDeviceToDevice, st.stream()));
  if (in.rows_stay) return;
  rows.resize(nrows);
  st.down(rows.data(), drows, nrows);
  st.finish();
}

void xent_max(Context& ctx, const float* z, const uint64_t* offsets, size_t samples, float* max) {
  if (samples == 0) return;
  Staging st(ctx, __func__);
  xent_max_kernel<<<blocks_for(samples), kThreads, 0, st.stream()>>>(z, offsets, samples, max);
  FRUGAL_LAUNCHED();
}

void xent_sums(Context& ctx, const float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
               const uint32_t* positions, size_t samples, const float* max, float* sums) {
  if (samples == 0) return;
  Staging st(ctx, __func__);
  xent_sums_kernel<<<blocks_for(samples), kThreads, 0, st.stream()>>>(z, offsets, pos_offsets, positions, samples,
                                                                      max, sums);
  FRUGAL_LAUNCHED();
}

void xent_loss_grad(Context& ctx, float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
                    const uint32_t* positions, const uint64_t* label_offsets, size_t samples, const float* max,
                    const float* sums, float scale, double* losses) {
  if (samples == 0) return;
  Staging st(ctx, __func__);
  xent_loss_grad_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(
      z, offsets, pos_offsets, positions, label_offsets, samples, max, sums, scale, losses);
  FRUGAL_LAUNCHED();
}

void top_k(Context& ctx, size_t rows, const float* scores, const uint64_t* offsets, size_t width,
           const uint32_t* ids, const float* bias, uint32_t label_base, size_t k, uint32_t* labels,
           float* out_scores) {
  if (rows == 0 || k == 0) return;
  Staging st(ctx, __func__);
  if (offsets == nullptr) {  // rows of `width` candidates: CSR offsets made on the device
    uint64_t* doff = st.alloc<uint64_t>(rows + 1);
    dense_offsets_kernel<<<blocks_for(rows + 1), kThreads, 0, st.stream()>>>(rows, width, doff);
    FRUGAL_LAUNCHED();
    offsets = doff;
  }
  if (k <= kTopKMax)
    top_k_block_kernel<<<blocks_for(rows, 1), kTopKThreads, 0, st.stream()>>>(rows, scores, offsets, ids, bias,
                                                                               label_base, k, labels, out_scores);
  else
    top_k_kernel<<<blocks_for(rows, 64), 64, 0, st.stream()>>>(rows, scores, offsets, ids, bias, label_base, k,
                                                               labels, out_scores);
  FRUGAL_LAUNCHED();
}

namespace {

// Row j's Adam update count, raised on the device: counts[j] = ++row_counts[rows[j]] (rows distinct).
__global__ void raise_counts_kernel(const uint32_t* rows, size_t n, uint32_t* row_counts, uint32_t* counts) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n; j += size_t{gridDim.x} * blockDim.x)
    counts[j] = ++row_counts[rows[j]];
}

// The device side of r: w, m, v, the gradient and Adam's corrections are device memory already; the
// row ids (unless the gradient's own list is on the device), update counts (unless raised there)
// and plans go up.
OptimRows upload(Staging& st, const OptimRows& r, bool adam) {
  OptimRows d = r;
  d.rows = r.rows == nullptr ? nullptr : r.rows_on_device ? r.rows : st.up(r.rows, r.n);
  if (r.has_plan != nullptr) {
    d.has_plan = st.up(r.has_plan, r.n);
    d.plan = st.up(r.plan, 4 * r.n);
    d.term_start = st.up(r.term_start, r.n + 1);
    d.terms = st.up(r.terms, 2 * static_cast<size_t>(r.term_start[r.n]));
  }
  if (adam && r.grad != nullptr && r.row_counts != nullptr && d.rows != nullptr) {
    uint32_t* dc = st.alloc<uint32_t>(r.n);
    raise_counts_kernel<<<blocks_for(r.n), kThreads, 0, st.stream()>>>(d.rows, r.n, r.row_counts, dc);
    FRUGAL_LAUNCHED();
    d.counts = dc;
  } else if (adam && r.grad != nullptr && r.counts != nullptr) {
    d.counts = st.up(r.counts, r.n);
  }
  return d;
}

enum class Rule { adam, sgd, adagrad, rowwise_adagrad, rowwise_adam };

template <class S>
void update_rows(Staging& st, const OptimRows& r, Rule rule) {
  const OptimRows d = upload(st, r, rule == Rule::adam || rule == Rule::rowwise_adam);
  const unsigned blocks = blocks_for(r.n * r.cols);
  if (rule == Rule::rowwise_adam) {
    float* moves = st.alloc<float>(r.n);
    float* steps = st.alloc<float>(r.n);
    rowwise_adam_rows_kernel<<<blocks_for(r.n), kThreads, 0, st.stream()>>>(d, moves, steps);
    FRUGAL_LAUNCHED();
    rowwise_adam_step_kernel<S><<<blocks, kThreads, 0, st.stream()>>>(d, moves, steps);
  } else if (rule == Rule::rowwise_adagrad) {
    float* steps = nullptr;
    if (d.grad != nullptr) {
      steps = st.alloc<float>(r.n);
      rowwise_accumulate_kernel<<<blocks_for(r.n), kThreads, 0, st.stream()>>>(d, steps);
      FRUGAL_LAUNCHED();
    }
    rowwise_step_kernel<S><<<blocks, kThreads, 0, st.stream()>>>(d, steps);
  } else if (rule == Rule::adam)
    adam_kernel<S><<<blocks, kThreads, 0, st.stream()>>>(d);
  else if (rule == Rule::sgd)
    sgd_kernel<S><<<blocks, kThreads, 0, st.stream()>>>(d);
  else
    adagrad_kernel<S><<<blocks, kThreads, 0, st.stream()>>>(d);
  FRUGAL_LAUNCHED();
}

void optimizer_rows(Context& ctx, const OptimRows& r, Rule rule) {
  if (r.n * r.cols == 0) return;
  Staging st(ctx, rule == Rule::adam                ? "adam_rows"
                 : rule == Rule::sgd               ? "sgd_rows"
                 : rule == Rule::rowwise_adagrad   ? "rowwise_adagrad_rows"
                 : rule == Rule::rowwise_adam      ? "rowwise_adam_rows"
                                                   : "adagrad_rows");
  if (r.bf16)
    update_rows<uint16_t>(st, r, rule);
  else
    update_rows<float>(st, r, rule);
}

}  // namespace

void adam_rows(Context& ctx, const OptimRows& r) { optimizer_rows(ctx, r, Rule::adam); }
void sgd_rows(Context& ctx, const OptimRows& r) { optimizer_rows(ctx, r, Rule::sgd); }
void adagrad_rows(Context& ctx, const OptimRows& r) { optimizer_rows(ctx, r, Rule::adagrad); }
void rowwise_adagrad_rows(Context& ctx, const OptimRows& r) { optimizer_rows(ctx, r, Rule::rowwise_adagrad); }
void rowwise_adam_rows(Context& ctx, const OptimRows& r) { optimizer_rows(ctx, r, Rule::rowwise_adam); }

void simhash(Context& ctx, const float* planes, size_t tables, int k, Matrix x, const uint32_t* rows, size_t n,
             size_t dim, uint32_t* codes, bool codes_on_device) {
  if (n == 0 || tables == 0) return;
  Staging st(ctx, __func__);
  const uint32_t* drows = rows != nullptr ? st.up(rows, n) : nullptr;
  uint32_t* dc = codes_on_device ? codes : st.alloc<uint32_t>(n * tables);
  if (x.bf16)
    simhash_kernel<<<blocks_for(n * tables), kThreads, 0, st.stream()>>>(
        planes, tables, k, static_cast<const uint16_t*>(x.p), drows, n, dim, dc);
  else
    simhash_kernel<<<blocks_for(n * tables), kThreads, 0, st.stream()>>>(
        planes, tables, k, static_cast<const float*>(x.p), drows, n, dim, dc);
  FRUGAL_LAUNCHED();
  if (codes_on_device) return;
  st.down(codes, dc, n * tables);
  st.finish();
}

void dwta(Context& ctx, const DwtaParams& p, const uint32_t* coords, bool coords_on_device, Matrix x,
          const uint32_t* rows, size_t n, size_t dim, uint32_t* codes, bool codes_on_device) {
  const size_t bins = p.tables * static_cast<size_t>(p.k);
  if (n == 0 || p.tables == 0) return;
  Staging st(ctx, __func__);
  const uint32_t* dcoords = st.up_or_device(coords, bins * static_cast<size_t>(p.bin_size), coords_on_device);
  const uint32_t* drows = rows != nullptr ? st.up(rows, n) : nullptr;
  int32_t* dwin = st.alloc<int32_t>(n * bins);
  uint32_t* dc = codes_on_device ? codes : st.alloc<uint32_t>(n * p.tables);
  if (x.bf16)
    dwta_winners_kernel<<<blocks_for(n * bins), kThreads, 0, st.stream()>>>(
        dcoords, bins, p.bin_size, static_cast<const uint16_t*>(x.p), drows, n, dim, dwin);
  else
    dwta_winners_kernel<<<blocks_for(n * bins), kThreads, 0, st.stream()>>>(
        dcoords, bins, p.bin_size, static_cast<const float*>(x.p), drows, n, dim, dwin);
  FRUGAL_LAUNCHED();
  dwta_codes_kernel<<<blocks_for(n * p.tables), kThreads, 0, st.stream()>>>(p, dwin, n, dc);
  FRUGAL_LAUNCHED();
  if (codes_on_device) return;
  st.down(codes, dc, n * p.tables);
  st.finish();
}

// Exclusive sum of n + 1 u64 values (the last 0) in place of `sums`, with CUB's scratch from st.
static void exclusive_sum(Staging& st, const uint64_t* values, size_t n, uint64_t* sums) {
  size_t bytes = 0;
  FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, bytes, values, sums, static_cast<int>(n + 1), st.stream()));
  void* scratch = st.alloc<std::byte>(bytes);
  FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(scratch, bytes, values, sums, static_cast<int>(n + 1), st.stream()));
}

// Per-sample counts (device) -> out_offsets (device, samples + 1); the total comes down (the one wait).
static uint64_t offsets_from_counts(Staging& st, const uint32_t* counts, size_t samples, uint64_t* out_offsets) {
  uint64_t* sizes = st.alloc<uint64_t>(samples + 1);
  widen_counts_kernel<<<blocks_for(samples + 1), kThreads, 0, st.stream()>>>(counts, samples, sizes);
  FRUGAL_LAUNCHED();
  exclusive_sum(st, sizes, samples, out_offsets);
  uint64_t total = 0;
  st.down(&total, out_offsets + samples, 1);
  st.finish();
  return total;
}

double sum_squares(Context& ctx, const float* x, size_t n, size_t chunk) {
  Staging st(ctx, __func__);
  const size_t chunks = (n + chunk - 1) / chunk;
  double* sums = st.alloc<double>(chunks);
  double* dtotal = st.alloc<double>(1);
  chunk_squares_kernel<<<blocks_for(chunks), kThreads, 0, st.stream()>>>(x, n, chunk, sums);
  FRUGAL_LAUNCHED();
  ordered_sum_kernel<<<1, 1, 0, st.stream()>>>(sums, chunks, dtotal);
  FRUGAL_LAUNCHED();
  double total = 0.0;
  st.down(&total, dtotal, 1);
  st.finish();
  return total;
}

void scale(Context& ctx, float* x, size_t n, float factor) {
  Staging st(ctx, __func__);
  scale_kernel<<<blocks_for(n), kThreads, 0, st.stream()>>>(x, n, factor);
  FRUGAL_LAUNCHED();
}

void ranking_add(Context& ctx, const ranking::Spec& spec, const uint32_t* top, size_t rows, size_t width,
                 const uint64_t* offsets, const uint32_t* labels, size_t num_labels, double* sums, uint32_t* covered,
                 uint32_t* relevant, uint64_t* counts, size_t flag_width) {
  if (rows == 0) return;
  Staging st(ctx, __func__);
  const size_t cols = spec.num_ks * ranking::kSums;
  uint32_t* truth = st.alloc<uint32_t>(std::max<size_t>(num_labels, 1));
  double* weights = spec.inverse != nullptr ? st.alloc<double>(std::max<size_t>(num_labels, 1)) : nullptr;
  double* shares = st.alloc<double>(rows * cols);
  const DeviceFlagMarks marks{relevant, covered, reinterpret_cast<unsigned long long*>(counts), flag_width,
                              spec.num_ks};
  ranking_point_kernel<<<blocks_for(rows), kThreads, 0, st.stream()>>>(spec, top, rows, width, offsets, labels, truth,
                                                                        weights, shares, marks);
  FRUGAL_LAUNCHED();
  ranking_sum_kernel<<<blocks_for(cols), kThreads, 0, st.stream()>>>(shares, rows, cols, sums);
  FRUGAL_LAUNCHED();
}

void bucket_build(Context& ctx, const uint32_t* codes, size_t n, size_t nt, uint32_t buckets, uint64_t capacity,
                  uint64_t seed, uint32_t* offsets, uint32_t* ids) {
  if (nt == 0) return;
  Staging st(ctx, __func__);
  const size_t stride = size_t{buckets} + 1;
  if (n == 0) {
    FRUGAL_CUDA(cudaMemsetAsync(offsets, 0, nt * stride * sizeof(uint32_t), st.stream()));
    return;
  }
  FRUGAL_CHECK(n <= 0x7fffffffu && stride <= 0x7fffffffu, "CUDA backend: a table build of more than 2^31 - 1 neurons");
  int end_bit = 1;
  while (end_bit < 32 && (uint64_t{1} << end_bit) < buckets) ++end_bit;
  uint32_t* keys = st.alloc<uint32_t>(n);
  uint32_t* rows = st.alloc<uint32_t>(n);
  uint32_t* sorted_keys = st.alloc<uint32_t>(n);
  uint32_t* sorted_rows = st.alloc<uint32_t>(n);
  uint32_t* counts = st.alloc<uint32_t>(stride);
  uint32_t* starts = st.alloc<uint32_t>(stride);
  uint32_t* kept = st.alloc<uint32_t>(stride);
  size_t sort_bytes = 0, scan_bytes = 0;
  FRUGAL_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, sorted_keys, rows, sorted_rows,
                                              static_cast<int>(n), 0, end_bit, st.stream()));
  FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts, starts, static_cast<int>(stride), st.stream()));
  const size_t scratch_bytes = std::max(sort_bytes, scan_bytes);
  void* scratch = st.alloc<std::byte>(scratch_bytes);
  // A table at a time: its neurons sorted by code (stable: ascending within a bucket), the buckets'
  // starts, what each keeps, and the kept neurons placed.
  for (size_t t = 0; t < nt; ++t) {
    uint32_t* table_offsets = offsets + t * stride;
    table_keys_kernel<<<blocks_for(n), kThreads, 0, st.stream()>>>(codes, n, nt, t, keys, rows);
    FRUGAL_LAUNCHED();
    size_t bytes = scratch_bytes;
    FRUGAL_CUDA(cub::DeviceRadixSort::SortPairs(scratch, bytes, keys, sorted_keys, rows, sorted_rows,
                                                static_cast<int>(n), 0, end_bit, st.stream()));
    FRUGAL_CUDA(cudaMemsetAsync(counts, 0, stride * sizeof(uint32_t), st.stream()));
    bucket_counts_kernel<<<blocks_for(n), kThreads, 0, st.stream()>>>(sorted_keys, n, counts);
    FRUGAL_LAUNCHED();
    bytes = scratch_bytes;
    FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(scratch, bytes, counts, starts, static_cast<int>(stride), st.stream()));
    bucket_keep_kernel<<<blocks_for(stride), kThreads, 0, st.stream()>>>(sorted_rows, starts, buckets, capacity, seed,
                                                                         t, kept);
    FRUGAL_LAUNCHED();
    bytes = scratch_bytes;
    FRUGAL_CUDA(cub::DeviceScan::ExclusiveSum(scratch, bytes, kept, table_offsets, static_cast<int>(stride),
                                              st.stream()));
    bucket_place_kernel<<<blocks_for(buckets, 1), kThreads, 0, st.stream()>>>(sorted_rows, starts, table_offsets,
                                                                               buckets, ids + t * n);
    FRUGAL_LAUNCHED();
  }
}

bool bucket_union(Context& ctx, const uint32_t* offsets, const uint32_t* ids, uint64_t ids_stride, uint32_t buckets,
                  uint32_t tables, uint32_t max_entries, const uint32_t* codes, size_t samples, const uint64_t* label_offsets,
                  const uint32_t* labels, size_t num_labels, uint64_t cap, uint64_t* scanned, uint64_t* out_offsets,
                  const std::function<uint32_t*(size_t)>& shape) {
  const uint32_t slots_max = bucket_union::pow2_at_least(std::max<uint32_t>(max_entries, 1));
  const size_t shared = slots_max * sizeof(uint64_t) + (size_t{tables} + 1 + kUnionThreads) * sizeof(uint32_t);
  int limit = 0;
  FRUGAL_CUDA(cudaSetDevice(ctx.device));
  FRUGAL_CUDA(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device));
  cudaFuncAttributes attributes{};
  FRUGAL_CUDA(cudaFuncGetAttributes(&attributes, bucket_union_kernel));  // its static shared memory counts too
  if (slots_max > kUnionThreads * bucket_union::kMaxItems ||
      shared + attributes.sharedSizeBytes > static_cast<size_t>(limit))
    return false;
  Staging st(ctx, __func__);
  if (samples == 0) {
    FRUGAL_CUDA(cudaMemsetAsync(out_offsets, 0, sizeof(uint64_t), st.stream()));
    shape(0);
    return true;
  }
  FRUGAL_CUDA(cudaFuncSetAttribute(bucket_union_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(shared)));
  const bucket_union::FlatTables flat{offsets, ids, buckets, ids_stride};
  // Sample i writes into its own region: room for its labels and every entry it reads, which the
  // device sums from its codes (an upper bound sizes the regions' buffer: nothing comes down).
  uint64_t* region = st.alloc<uint64_t>(samples + 1);
  uint64_t* dstart = st.alloc<uint64_t>(samples + 1);
  union_regions_kernel<<<blocks_for(samples + 1), kThreads, 0, st.stream()>>>(flat, tables, codes, label_offsets,
                                                                               samples, scanned, region);
  FRUGAL_LAUNCHED();
  exclusive_sum(st, region, samples, dstart);
  uint32_t* dout = st.alloc<uint32_t>(num_labels + samples * size_t{max_entries});
  uint32_t* dcounts = st.alloc<uint32_t>(samples);
  bucket_union_kernel<<<static_cast<unsigned>(samples), kUnionThreads, shared, st.stream()>>>(
      flat, tables, codes, label_offsets, labels, cap, slots_max, dstart, dout, dcounts);
  FRUGAL_LAUNCHED();
  const uint64_t total = offsets_from_counts(st, dcounts, samples, out_offsets);
  uint32_t* dst = shape(total);
  if (total == 0) return true;
  compact_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(samples, dstart, out_offsets, dout, dst);
  FRUGAL_LAUNCHED();
  return true;
}

void active_extend(Context& ctx, const active_extend::Spec& spec, const uint64_t* in_offsets, const uint32_t* in_ids,
                   size_t samples, size_t in_total, uint64_t* out_offsets,
                   const std::function<ExtendOut(size_t)>& shape) {
  Staging st(ctx, __func__);
  if (samples == 0) {
    FRUGAL_CUDA(cudaMemsetAsync(out_offsets, 0, sizeof(uint64_t), st.stream()));
    shape(0);
    return;
  }
  uint64_t* region = st.alloc<uint64_t>(samples + 1);
  uint64_t* dstart = st.alloc<uint64_t>(samples + 1);
  extend_regions_kernel<<<blocks_for(samples + 1), kThreads, 0, st.stream()>>>(spec, in_offsets, samples, region);
  FRUGAL_LAUNCHED();
  exclusive_sum(st, region, samples, dstart);
  // Every sample's region is at most its members, the top-up target and the draws: the bound sizes it.
  const size_t target = std::min(spec.min_active, spec.neurons);
  const size_t bound = in_total + samples * (target + spec.draws);
  uint32_t* dout = st.alloc<uint32_t>(bound);
  float* doffsets = spec.draws > 0 ? st.alloc<float>(bound) : nullptr;
  uint32_t* ddrawn = st.alloc<uint32_t>(samples * spec.draws);
  uint32_t* dcounts = st.alloc<uint32_t>(samples);
  extend_kernel<<<blocks_for(samples), kThreads, 0, st.stream()>>>(spec, in_offsets, in_ids, samples, dstart, dout,
                                                                   doffsets, ddrawn, dcounts);
  FRUGAL_LAUNCHED();
  const uint64_t total = offsets_from_counts(st, dcounts, samples, out_offsets);
  const ExtendOut out = shape(total);
  if (total == 0) return;
  compact_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(samples, dstart, out_offsets, dout, out.ids);
  FRUGAL_LAUNCHED();
  if (doffsets != nullptr)
    compact_kernel<<<blocks_for(samples, 1), kThreads, 0, st.stream()>>>(samples, dstart, out_offsets, doffsets,
                                                                         out.logit_offsets);
  FRUGAL_LAUNCHED();
}

}  // namespace frugal::gpu::dev
