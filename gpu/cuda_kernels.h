// The device half of the CUDA backend (gpu/cuda_kernels.cu): plain functions over host arrays, so
// that gpu/cuda_backend.cpp (compiled by the host compiler) needs no CUDA header. Each function
// copies its host inputs into the context's staging buffers, runs cuBLAS, CUB or a kernel of its own,
// copies the results back and returns when they are in host memory. Inputs given as In{p, true} are
// already on the device: the copies of weights, biases and optimizer state the backend keeps there
// (core/device_mirror.h, through the memory functions below), used where they are.
//
// Every sum is one thread's, in a fixed order (no float atomics; CUB's sort is stable), so results
// are deterministic; the .cu files are built with -fmad=false, so the element-wise ops round
// as the CPU kernels do (no contracted multiply-adds). Errors throw frugal::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace frugal::gpu::dev {

// A device (0), one stream, a cuBLAS handle and staging buffers that grow and are kept.
struct Context;
Context* context_create();
void context_destroy(Context* ctx) noexcept;  // not at process exit (gpu/cuda_backend.cpp)
void synchronize(Context& ctx);

// Device memory for the backend's DeviceMirror: allocate throws naming the size when the device has
// no room; copies return when done. free_bytes: cudaMemGetInfo's free memory.
void* device_alloc(Context& ctx, size_t bytes);
void device_free(Context& ctx, void* p) noexcept;
void upload(Context& ctx, void* device, const void* host, size_t bytes);
void download(Context& ctx, void* host, const void* device, size_t bytes);
size_t free_bytes(Context& ctx);

// An input in host memory (staged by the op) or already on the device (device = true).
template <class T>
struct In {
  const T* p = nullptr;
  bool device = false;
};
// A weight matrix an op reads: host f32 memory (staged), or a device copy in f32 or bf16 storage
// (`--precision bf16`; the kernels widen each element, as the CPU's bf16 kernels do).
struct Matrix {
  const void* p = nullptr;
  bool device = false;
  bool bf16 = false;
};

// C (m x n) = op(a) op(b) (+ c), row-major, as Backend::matmul; fp32 cuBLAS (no TF32), or with
// bf16: both operands rounded to bf16 on the device (to nearest even) and multiplied by cuBLAS
// GemmEx with f32 compute and output (tensor cores).
void matmul(Context& ctx, In<float> a, bool trans_a, In<float> b, bool trans_b, float* c, int64_t m, int64_t n,
            int64_t k, bool accumulate, bool bf16);
void bias_act_forward(Context& ctx, float* y, size_t rows, size_t cols, In<float> bias, bool relu);
// y is read only with relu.
void bias_act_backward(Context& ctx, float* grad, const float* y, size_t rows, size_t cols, bool relu,
                       float* bias_grad);

// out[i] = act(bias + sum over point i's entries e, in order, of vals[e] * w[ids[e]]): w holds the
// w_rows rows the ids refer to, h columns each.
void sparse_forward(Context& ctx, const uint64_t* offsets, size_t points, const uint32_t* ids, const float* vals,
                    Matrix w, size_t w_rows, size_t h, In<float> bias, bool relu, float* out);
// logits[e] = <h[sample[e]], w[ids[e]]> + bias[ids[e]] (then + offsets[e] when not null), the dot
// product with the CPU kernels' 16 partial sums.
void active_logits(Context& ctx, const float* h, size_t samples, size_t d, const uint32_t* sample,
                   const uint32_t* ids, size_t entries, Matrix w, In<float> bias, size_t w_rows,
                   size_t bias_rows, const float* logit_offsets, float* logits);
// grad_h[i] = sum over sample i's entries e (in order, skipping dlogits[e] == 0) of dlogits[e] w[ids[e]].
void active_backward(Context& ctx, const uint64_t* offsets, size_t samples, const uint32_t* ids,
                     const float* dlogits, Matrix w, size_t w_rows, size_t d, float* grad_h);
// Row accumulation (kernels/sparse_ops.cpp's RowAccumulator), all of it on the device: entry e of
// sample i (offsets[i] <= e < offsets[i+1]) adds coefs[e] * vecs[i] (d floats) to row ids[e] (ids
// below num_rows, checked by the caller). rows gets the distinct rows, ascending; prepare(nrows) is
// then called once, and row j's sum (its entries in input order, as the CPU sums them) goes to
// values + j d, the sum of its coefficients to bias[j] (when bias is not null).
struct RowSumsOut {
  float* values = nullptr;
  float* bias = nullptr;
};
void row_accumulate(Context& ctx, const uint64_t* offsets, size_t samples, const uint32_t* ids, const float* coefs,
                    size_t num_rows, const float* vecs, size_t d, std::vector<uint32_t>& rows,
                    const std::function<RowSumsOut(size_t)>& prepare);

// The softmax cross-entropy ops of Backend, one thread per sample.
void xent_max(Context& ctx, const float* z, size_t nz, const uint64_t* offsets, size_t samples, float* max);
void xent_sums(Context& ctx, const float* z, size_t nz, const uint64_t* offsets, const uint64_t* pos_offsets,
               const uint32_t* positions, size_t samples, const float* max, float* sums);
void xent_loss_grad(Context& ctx, float* z, size_t nz, const uint64_t* offsets, const uint64_t* pos_offsets,
                    const uint32_t* positions, const uint64_t* label_offsets, size_t samples, const float* max,
                    const float* sums, float scale, double* losses);

// Backend::top_k with CSR rows (offsets always given); bias has bias_size entries (or is null).
void top_k(Context& ctx, size_t rows, const float* scores, const uint64_t* offsets, const uint32_t* ids,
           In<float> bias, size_t bias_size, uint32_t label_base, size_t k, uint32_t* labels, float* out_scores);

// The listed rows of an optimizer step: w, m, v are the device copies of the whole matrices (f32, or
// bf16 with bf16 set), row j of the update is their row rows[j] (host ids, n of them), and the
// updated rows of w come back, as stored, to the host rows w_out_rows[j] (cols elements each); m and v
// stay on the device. bf16: keys[j] (host) is row j's rounding key and col_base the first column's
// position in the whole parameter (kernels/optim_ops.cpp's row_key and col_base).
// Plans: has_plan[j]; plan[4j..4j+3] = decay, move, m_decay, v_decay; row j's catch-up terms are
// terms[2 term_start[j] .. 2 term_start[j+1]). Adam: step[j] = lr * correction1[count], c2[j] =
// correction2[count]; frozen[j] (null: none) marks a row whose second moment is frozen (c2[j] is
// then correction2[freeze_after], and v is raised to frozen_floor g^2 where below). Adagrad: m is the accumulator, eps Adagrad's. grad null: catch-up only.
struct OptimRows {
  size_t n = 0, cols = 0;
  void *w = nullptr, *m = nullptr, *v = nullptr;
  bool bf16 = false;
  const uint32_t* rows = nullptr;
  void* const* w_out_rows = nullptr;  // the host address of each listed row of w
  const uint32_t* keys = nullptr;
  uint32_t col_base = 0;
  const float* grad = nullptr;
  const uint8_t* has_plan = nullptr;  // null: no plans
  const float* plan = nullptr;
  const uint32_t* term_start = nullptr;
  const float* terms = nullptr;
  const float *step = nullptr, *c2 = nullptr;
  const uint8_t* frozen = nullptr;
  float frozen_floor = 0;
  float keep = 1, beta1 = 0, beta2 = 0, eps = 0, lr = 0, momentum = 0;
};
void adam_rows(Context& ctx, const OptimRows& r);
void sgd_rows(Context& ctx, const OptimRows& r);
void adagrad_rows(Context& ctx, const OptimRows& r);

// codes[j * tables + t] for n rows of x (dim columns), as Backend's LSH ops.
// rows (host, n ids; null: rows 0..n-1 of x) are the rows of x hashed.
void simhash(Context& ctx, const float* planes, size_t tables, int k, Matrix x, const uint32_t* rows, size_t n,
             size_t dim, uint32_t* codes);
struct DwtaParams {
  size_t tables = 0;
  int k = 0, bin_size = 0, bin_bits = 0, bucket_bits = 0, max_bucket_bits = 0;
  uint64_t seed = 0;
};
void dwta(Context& ctx, const DwtaParams& p, const uint32_t* coords, Matrix x, const uint32_t* rows, size_t n,
          size_t dim, uint32_t* codes);

// Backend::bucket_union over tables on the device in core/bucket_union.h's flat layout (offsets,
// ids: device memory, `tables` x (buckets + 1) offsets into ids). One block per sample runs that
// header's program in shared memory sized for max_entries (the most bucket entries any sample can
// read: the sum over tables of their largest bucket). Returns false, having done nothing, when a
// block cannot have that much (the caller then looks up on the host). codes, label_offsets,
// labels and entries (each sample's bucket entries, which size its output region) are host memory;
// out_offsets / out_ids receive the result.
bool bucket_union(Context& ctx, const uint32_t* offsets, const uint32_t* ids, uint32_t buckets, uint32_t tables,
                  uint32_t max_entries, const uint32_t* codes, size_t samples, const uint64_t* label_offsets,
                  const uint32_t* labels, uint64_t cap, const uint64_t* entries, std::vector<uint64_t>& out_offsets,
                  std::vector<uint32_t>& out_ids);

}  // namespace frugal::gpu::dev
