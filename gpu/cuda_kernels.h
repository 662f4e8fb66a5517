// The device half of the CUDA backend (gpu/cuda_kernels.cu): plain functions over device pointers,
// so that gpu/cuda_backend.cpp (compiled by the host compiler) needs no CUDA header.
//
// Pointers named as device memory are the backend's buffers (its tensors); the arguments the
// interface still passes in host memory (LSH tables built on the host, a table build's row list,
// an optimizer's row lists, counts and catch-up plans when they are not on the device)
// are named as host memory: a function copies those up itself
// (through pinned staging, counted) and, for a host output, copies it back and returns with it
// filled. Everything is ordered on the context's one stream: a function whose outputs are all device
// memory returns once its work is queued.
//
// Every sum is one thread's, in a fixed order (no float atomics; CUB's sort is stable), so results
// are deterministic; the .cu files are built with -fmad=false, so the element-wise ops round
// as the CPU kernels do (no contracted multiply-adds). Errors throw frugal::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/active_extend.h"
#include "core/ranking_counts.h"

namespace frugal::gpu::dev {

// A device (0), its stream, a cuBLAS handle and staging buffers that grow and are kept.
struct Context;
Context* context_create();
void context_destroy(Context* ctx) noexcept;  // not at process exit (gpu/cuda_backend.cpp)
void synchronize(Context& ctx);

// Device memory (cudaMalloc / cudaFree: the backend's caching allocator, core/caching_allocator.h,
// calls these only when its cache has no block). device_alloc throws naming the size when the
// device has no room; device_free ignores errors (at process exit the runtime may be gone).
void* device_alloc(Context& ctx, size_t bytes);
void device_free(void* p) noexcept;
size_t free_bytes(Context& ctx);

// Backend::set / get / copy / clear on device memory, ordered on the stream. set returns when
// `host` may be reused (its bytes are in pinned staging or on the device); get returns with `host`
// filled. Each counts in the profile (FRUGAL_CUDA_PROFILE) as "set" / "get".
void set(Context& ctx, void* device, const void* host, size_t bytes);
void get(Context& ctx, void* host, const void* device, size_t bytes);
void copy(Context& ctx, void* dst, const void* src, size_t bytes);
void clear(Context& ctx, void* device, size_t bytes);

// Bytes that crossed between the host and the device so far: set, get and the staging of host
// arguments inside the functions below.
struct Crossed {
  uint64_t up_bytes = 0, up_calls = 0, down_bytes = 0, down_calls = 0, device_bytes = 0;
};
Crossed crossed(const Context& ctx);

// A weight matrix an op reads (device memory) in f32 or bf16 storage (`--precision bf16`: the
// kernels widen each element, as the CPU's bf16 kernels do).
struct Matrix {
  const void* p = nullptr;
  bool bf16 = false;
};

// C (m x n) = op(a) op(b) (+ c), row-major, as Backend::matmul; fp32 cuBLAS (no TF32), or with
// bf16: both operands rounded to bf16 on the device (to nearest even) and multiplied by cuBLAS
// GemmEx with f32 compute and output (tensor cores). a, b, c: device.
void matmul(Context& ctx, const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n,
            int64_t k, bool accumulate, bool bf16);
// y, bias: device.
void bias_act_forward(Context& ctx, float* y, size_t rows, size_t cols, const float* bias, bool relu);
// grad, y (read only with relu), bias_grad: device.
void bias_act_backward(Context& ctx, float* grad, const float* y, size_t rows, size_t cols, bool relu,
                       float* bias_grad);

// out[i] = act(bias + sum over point i's entries e, in order, of vals[e] * w[ids[e]]): w holds the
// rows the ids refer to (checked by the layer on the host), h columns each. Every pointer is device
// memory (the batch's CSR was set where the step begins).
void sparse_forward(Context& ctx, const uint64_t* offsets, size_t points, const uint32_t* ids, const float* vals,
                    Matrix w, size_t h, const float* bias, bool relu, float* out);
// logits[e] = <h[i], w[ids[e]]> + bias[ids[e]] for entry e of sample i (offsets[i] <= e <
// offsets[i+1]), then + logit_offsets[e] when not null, the dot product with the CPU kernels' 16
// partial sums. Every pointer is device memory (the sets were set where the step samples them).
void active_logits(Context& ctx, const float* h, size_t d, const uint64_t* offsets, size_t samples,
                   const uint32_t* ids, size_t entries, Matrix w, const float* bias, const float* logit_offsets,
                   float* logits);
// grad_h[i] = sum over sample i's entries e (in order, skipping dlogits[e] == 0) of dlogits[e] w[ids[e]].
// Every pointer is device memory.
void active_backward(Context& ctx, const uint64_t* offsets, size_t samples, const uint32_t* ids,
                     const float* dlogits, Matrix w, size_t d, float* grad_h);
// Row accumulation (kernels/sparse_ops.cpp's RowAccumulator), all of it on the device: entry e of
// sample i (offsets[i] <= e < offsets[i+1]) adds coefs[e] * vecs[i] (d floats) to row ids[e] (ids
// below num_rows, checked by the caller). rows (host) gets the distinct rows, ascending; prepare(nrows)
// is then called once and returns where row j's sum goes (values + j d, device) and the sum of its
// coefficients (bias[j], device, when not null). offsets, ids: host (staged) or, with
// entries_on_device, device memory (the input batch's CSR); coefs, vecs: device.
// With rows_listed, rows already holds the distinct rows (the caller listed them on the host): no
// count and no list come down, and the device's list is copied to prepare's row_ids (device).
struct RowSumsOut {
  float* values = nullptr;
  float* bias = nullptr;
  uint32_t* row_ids = nullptr;
};
struct RowEntries {
  const uint64_t* offsets = nullptr;  // samples + 1
  const uint32_t* ids = nullptr;      // entries
  size_t samples = 0, entries = 0;
  bool on_device = false;
  bool rows_listed = false;
  // Not listed by the caller, and kept on the device only (prepare's row_ids): the count comes
  // down, the list does not (RowGrad::rows_on_device).
  bool rows_stay = false;
};
void row_accumulate(Context& ctx, const RowEntries& in, const float* coefs, size_t num_rows, const float* vecs,
                    size_t d, std::vector<uint32_t>& rows, const std::function<RowSumsOut(size_t)>& prepare);

// The softmax cross-entropy ops of Backend, one thread per sample; every pointer is device memory.
void xent_max(Context& ctx, const float* z, const uint64_t* offsets, size_t samples, float* max);
void xent_sums(Context& ctx, const float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
               const uint32_t* positions, size_t samples, const float* max, float* sums);
void xent_loss_grad(Context& ctx, float* z, const uint64_t* offsets, const uint64_t* pos_offsets,
                    const uint32_t* positions, const uint64_t* label_offsets, size_t samples, const float* max,
                    const float* sums, float scale, double* losses);

// Backend::top_k. scores, ids (null: positions), bias (null: none; its entry for label 0),
// labels, out_scores: device. offsets: device, or null for rows of `width` candidates.
void top_k(Context& ctx, size_t rows, const float* scores, const uint64_t* offsets, size_t width,
           const uint32_t* ids, const float* bias, uint32_t label_base, size_t k, uint32_t* labels,
           float* out_scores);

// The listed rows of an optimizer step: w, m, v, grad are device memory (f32 state, or bf16 with
// bf16 set), row j of the update is their row rows[j] (host ids, n of them, staged with every other
// host array here; null: row j itself, every row of the parameter). bf16: row r's rounding key is
// rounding_row_key(round_seed, row_base + r) and col_base the first column's position in the whole
// parameter (kernels/optim_ops.cpp's row_key and col_base), computed on the device.
// Plans: has_plan[j]; plan[4j..4j+3] = decay, move, m_decay, v_decay; row j's catch-up terms are
// terms[2 term_start[j] .. 2 term_start[j+1]). Adam: counts[j] is row j's update count (host,
// staged; null: count_all for every row) and corrections the T x 2 table of bias corrections (device: row t = correction1(t),
// correction2(t)); row j's step is lr * correction1(count), and a row whose count is above
// freeze_after (> 0) has a frozen second moment: it divides by correction2(freeze_after) and v is
// raised to (1 - beta2) / correction2(freeze_after) g^2 where below. Adagrad: m is the accumulator,
// eps Adagrad's. grad null: catch-up only.
struct OptimRows {
  size_t n = 0, cols = 0;
  void *w = nullptr, *m = nullptr, *v = nullptr;
  bool bf16 = false;
  const uint32_t* rows = nullptr;
  bool rows_on_device = false;  // rows is device memory (the gradient's own list) and not staged
  // Device, Adam: per-row update counts of the whole parameter; row j's count is ++row_counts[rows[j]]
  // (counts is then not read).
  uint32_t* row_counts = nullptr;
  uint64_t round_seed = 0, row_base = 0;
  uint32_t col_base = 0;
  const float* grad = nullptr;
  const uint8_t* has_plan = nullptr;  // null: no plans
  const float* plan = nullptr;
  const uint32_t* term_start = nullptr;
  const float* terms = nullptr;
  const uint32_t* counts = nullptr;
  uint32_t count_all = 0;
  const float* corrections = nullptr;
  uint32_t freeze_after = 0;
  float keep = 1, beta1 = 0, beta2 = 0, eps = 0, lr = 0, momentum = 0;
};
void adam_rows(Context& ctx, const OptimRows& r);
void sgd_rows(Context& ctx, const OptimRows& r);
void adagrad_rows(Context& ctx, const OptimRows& r);
// Row-wise Adagrad: m is one f32 per row of the whole parameter (Backend::rowwise_adagrad_rows).
void rowwise_adagrad_rows(Context& ctx, const OptimRows& r);
// Row-wise Adam: v is one f32 per row of the whole parameter, m per element or null (no momentum)
// (Backend::rowwise_adam_rows).
void rowwise_adam_rows(Context& ctx, const OptimRows& r);

// codes[j * tables + t] for n rows of x (dim columns), as Backend's LSH ops: planes, coords and x
// are device memory; rows (host, n ids; null: rows 0..n-1 of x) are staged; codes are device memory
// with codes_on_device (nothing comes down), else host memory (they come down).
void simhash(Context& ctx, const float* planes, size_t tables, int k, Matrix x, const uint32_t* rows, size_t n,
             size_t dim, uint32_t* codes, bool codes_on_device);
struct DwtaParams {
  size_t tables = 0;
  int k = 0, bin_size = 0, bin_bits = 0, bucket_bits = 0, max_bucket_bits = 0;
  uint64_t seed = 0;
};
// coords: tables * k * bin_size ids below dim, device memory with coords_on_device, else host.
void dwta(Context& ctx, const DwtaParams& p, const uint32_t* coords, bool coords_on_device, Matrix x,
          const uint32_t* rows, size_t n, size_t dim, uint32_t* codes, bool codes_on_device);

// Backend::bucket_union over tables on the device in core/bucket_union.h's flat layout (offsets,
// ids: device memory, `tables` x (buckets + 1) offsets into ids). One block per sample runs that
// header's program in shared memory sized for max_entries (the most bucket entries any sample can
// read: the sum over tables of their largest bucket). Returns false, having done nothing, when a
// block cannot have that much (the caller then looks up on the host). ids_stride: 0 when offsets
// count from the first table's ids, else where each table's ids start (tables built on the
// device, core/bucket_union.h's FlatTables). codes (samples x tables),
// label_offsets (samples + 1) and labels (num_labels) are device memory; scanned (device, samples
// entries, or null) gets each sample's bucket entries; out_offsets (device, samples + 1) the
// result's offsets; the result's total comes down (8 bytes), and shape(total) returns where its ids
// go (device).
bool bucket_union(Context& ctx, const uint32_t* offsets, const uint32_t* ids, uint64_t ids_stride, uint32_t buckets,
                  uint32_t tables, uint32_t max_entries, const uint32_t* codes, size_t samples, const uint64_t* label_offsets,
                  const uint32_t* labels, size_t num_labels, uint64_t cap, uint64_t* scanned, uint64_t* out_offsets,
                  const std::function<uint32_t*(size_t)>& shape);

// Backend::sum_squares (core/backend.h's kSquaresChunk order: a thread per chunk, then one thread
// adds the chunks' sums in order; the sum comes down) and Backend::scale; x is device memory.
double sum_squares(Context& ctx, const float* x, size_t n, size_t chunk);
void scale(Context& ctx, float* x, size_t n, float factor);

// Backend::ranking_add: core/ranking_counts.h's program, a thread per point (its labels sorted in
// scratch), the shares then added to sums by a thread per sum, point by point (the host's order).
// Every pointer is device memory: top (rows x width), offsets (rows + 1, into labels), the state's
// sums (spec.num_ks x kSums), flag words (covered: num_ks x flag_width / 32; relevant: flag_width /
// 32) and counts.
void ranking_add(Context& ctx, const ranking::Spec& spec, const uint32_t* top, size_t rows, size_t width,
                 const uint64_t* offsets, const uint32_t* labels, size_t num_labels, double* sums, uint32_t* covered,
                 uint32_t* relevant, uint64_t* counts, size_t flag_width);

// Backend::bucket_build: codes (n x nt), offsets (nt x (buckets + 1)) and ids (nt x n) are device
// memory; a table at a time (a rebuild: CUB's radix sort by code, the keep of core/bucket_build.h).
void bucket_build(Context& ctx, const uint32_t* codes, size_t n, size_t nt, uint32_t buckets, uint64_t capacity,
                  uint64_t seed, uint32_t* offsets, uint32_t* ids);

// Backend::active_extend: spec's tables, in_offsets (samples + 1) and in_ids (in_total) are device
// memory; out_offsets (device, samples + 1) gets the result's offsets; its total comes down (8
// bytes) and shape(total) returns where its ids and (with draws) logit offsets go (device).
struct ExtendOut {
  uint32_t* ids = nullptr;
  float* logit_offsets = nullptr;
};
void active_extend(Context& ctx, const active_extend::Spec& spec, const uint64_t* in_offsets, const uint32_t* in_ids,
                   size_t samples, size_t in_total, uint64_t* out_offsets,
                   const std::function<ExtendOut(size_t)>& shape);

}  // namespace frugal::gpu::dev
