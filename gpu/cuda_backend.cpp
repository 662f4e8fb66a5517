// The CUDA Backend's host half: argument checks, the host-side preparation (each entry's sample,
// flattened catch-up plans, the tables' flat layout), buffers from the caching allocator and the
// calls into gpu/cuda_kernels.cu. Compiled by the host compiler: no CUDA header.
#include "gpu/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "gpu/cuda_info.h"
#include "gpu/cuda_kernels.h"

namespace frugal::gpu {
namespace {

void check_range(const Buffer& b, size_t offset, size_t bytes, const char* op) {
  check_buffer_range(b, offset, bytes, fmt::format("cuda backend: {}", op));
}

std::string tensor_words(const Tensor& t) {
  return t.name().empty() ? fmt::format("a {}x{} tensor", t.rows(), t.cols()) : fmt::format("tensor '{}'", t.name());
}

// A probe, registered when libfrugal is loaded (libfrugal links this object whole): the backend is
// made the first time "cuda" is asked for, and only when the process sees a CUDA device (without
// one, find_backend("cuda") is null). Nothing here touches CUDA before that: a process on --device
// cpu never starts the driver. (When the device was counted from this static initializer,
// compute-sanitizer refused to run frugal's executables: "CUDA initialized before the Sanitizer".)
bool register_probe() {
  register_backend_probe("cuda", []() -> std::unique_ptr<Backend> {
    if (device_count() < 1) return nullptr;
    return std::make_unique<CudaBackend>();
  });
  return true;
}
[[maybe_unused]] const bool registered = register_probe();

}  // namespace

// An op's tensors in device memory: this backend's own as they are; a host tensor is copied up for
// the op (a set, counted as crossing) and, when the op writes it, back after it (finish(): a get).
// A tensor on another device is refused, naming it.
class CudaBackend::Args {
 public:
  Args(CudaBackend& be, const char* op) : be_(be), op_(op) {}
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  template <class T>
  const T* in(const Tensor& t) {
    return static_cast<const T*>(place(t, true, false));
  }
  template <class T>
  T* out(Tensor& t) {
    return static_cast<T*>(place(t, false, true));
  }
  template <class T>
  T* inout(Tensor& t) {
    return static_cast<T*>(place(t, true, true));
  }
  dev::Matrix matrix(const Tensor& t) {
    FRUGAL_CHECK(t.dtype() == Dtype::f32 || t.dtype() == Dtype::bf16,
                 fmt::format("cuda {}: {} is {}, not a weight matrix's f32 or bf16", op_, tensor_words(t),
                             dtype_name(t.dtype())));
    return {place(t, true, false), t.dtype() == Dtype::bf16};
  }
  // The host outputs' values, back from their device copies.
  void finish() {
    for (auto& [host, temp] : outputs_) copy_to_host(*temp, host->device_data());
    outputs_.clear();
  }

 private:
  void* place(const Tensor& t, bool read, bool written) {
    if (t.owner() == &be_) return t.device_data();
    FRUGAL_CHECK(t.is_host(), fmt::format("cuda {}: {} lives on {}, not on this backend's device ({})", op_,
                                          tensor_words(t), t.device().name(), be_.device().name()));
    Tensor& temp = temps_.emplace_back(t.rows(), t.cols(), t.dtype(), be_);
    if (read) copy_from_host(temp, t.device_data());
    if (written) outputs_.emplace_back(const_cast<Tensor*>(&t), &temp);
    return temp.device_data();
  }
  CudaBackend& be_;
  const char* op_;
  std::deque<Tensor> temps_;
  std::vector<std::pair<Tensor*, Tensor*>> outputs_;
};

CudaBackend::CudaBackend()
    : memory_(std::make_shared<CachingAllocator>([this](size_t bytes) { return dev::device_alloc(context(), bytes); },
                                                 [](void* p) { dev::device_free(p); })) {}
// The registry keeps its backends until the process exits, when the CUDA runtime may already be
// torn down (its exit handlers run first): destroying the stream or the cuBLAS handle then is not
// safe, so the context is left to the process's end, which releases everything anyway.
CudaBackend::~CudaBackend() = default;

dev::Context& CudaBackend::context() const {
  if (ctx_ == nullptr) ctx_ = dev::context_create();
  return *ctx_;
}

std::optional<uint64_t> CudaBackend::state_memory_available() const {
  return dev::free_bytes(context()) + memory_->stats().cached_bytes;
}

bool CudaBackend::supports(Op) const { return true; }

void CudaBackend::synchronize() {
  if (ctx_ != nullptr) dev::synchronize(*ctx_);
}

void CudaBackend::set_num_threads(int threads) {
  FRUGAL_CHECK(threads >= 0, "the thread count must be >= 0");
  threads_ = threads;
}

bool CudaBackend::set_bf16_products(bool on) {
  bf16_products_ = on;
  return true;
}

// --- memory ---------------------------------------------------------------------------------------

std::shared_ptr<Buffer> CudaBackend::alloc_buffer(size_t bytes) {
  return make_cached_buffer(device(), memory_, bytes, this);
}

CachingAllocator::Stats CudaBackend::memory_stats() const { return memory_->stats(); }

void CudaBackend::set(Buffer& dst, size_t offset, const void* src, size_t bytes) {
  check_range(dst, offset, bytes, "set");
  if (bytes == 0) return;
  if (dst.is_host()) {
    std::memcpy(dst.base() + offset, src, bytes);
    return;
  }
  FRUGAL_CHECK(dst.owner() == this, fmt::format("cuda backend: set into a buffer on {}", dst.device().name()));
  dev::set(context(), dst.base() + offset, src, bytes);
}

void CudaBackend::get(const Buffer& src, size_t offset, void* dst, size_t bytes) {
  check_range(src, offset, bytes, "get");
  if (bytes == 0) return;
  if (src.is_host()) {
    std::memcpy(dst, src.base() + offset, bytes);
    return;
  }
  FRUGAL_CHECK(src.owner() == this, fmt::format("cuda backend: get from a buffer on {}", src.device().name()));
  dev::get(context(), dst, src.base() + offset, bytes);
}

void CudaBackend::copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) {
  check_range(dst, dst_offset, bytes, "copy");
  check_range(src, src_offset, bytes, "copy");
  for (const Buffer* b : {static_cast<const Buffer*>(&dst), &src})
    FRUGAL_CHECK(b->is_host() || b->owner() == this,
                 fmt::format("cuda backend: copy with a buffer on {}", b->device().name()));
  if (bytes == 0) return;
  if (dst.is_host() && src.is_host()) {
    std::memmove(dst.base() + dst_offset, src.base() + src_offset, bytes);
  } else if (dst.is_host()) {
    dev::get(context(), dst.base() + dst_offset, src.base() + src_offset, bytes);
  } else if (src.is_host()) {
    dev::set(context(), dst.base() + dst_offset, src.base() + src_offset, bytes);
  } else {
    dev::copy(context(), dst.base() + dst_offset, src.base() + src_offset, bytes);
  }
}

void CudaBackend::clear(Buffer& dst, size_t offset, size_t bytes) {
  check_range(dst, offset, bytes, "clear");
  if (bytes == 0) return;
  if (dst.is_host()) {
    std::memset(dst.base() + offset, 0, bytes);
    return;
  }
  FRUGAL_CHECK(dst.owner() == this, fmt::format("cuda backend: clear of a buffer on {}", dst.device().name()));
  dev::clear(context(), dst.base() + offset, bytes);
}

Backend::Transfers CudaBackend::transfers() const {
  if (ctx_ == nullptr) return {};
  const dev::Crossed c = dev::crossed(*ctx_);
  return {.to_device_bytes = c.up_bytes, .to_device_calls = c.up_calls, .to_host_bytes = c.down_bytes,
          .to_host_calls = c.down_calls, .on_device_bytes = c.device_bytes};
}

// --- ops ------------------------------------------------------------------------------------------

void CudaBackend::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate) {
  const MatmulShape s = matmul_shape(a, trans_a, b, trans_b, c);
  Args args(*this, "matmul");
  const float* da = args.in<float>(a);
  const float* db = args.in<float>(b);
  float* dc = accumulate ? args.inout<float>(c) : args.out<float>(c);
  dev::matmul(context(), da, trans_a, db, trans_b, dc, s.m, s.n, s.k, accumulate, bf16_products_);
  args.finish();
}

void CudaBackend::bias_act_forward(Tensor& y, const Tensor& bias, Act act) {
  FRUGAL_CHECK(bias.size() == y.cols(),
               fmt::format("bias has {} entries, the output {} columns", bias.size(), y.cols()));
  if (y.empty()) return;
  Args args(*this, "bias_act_forward");
  dev::bias_act_forward(context(), args.inout<float>(y), y.rows(), y.cols(), args.in<float>(bias),
                        act == Act::relu);
  args.finish();
}

void CudaBackend::bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  const size_t rows = grad.rows(), n = grad.cols();
  FRUGAL_CHECK(bias_grad.size() == n,
               fmt::format("bias gradient has {} entries, the output {} columns", bias_grad.size(), n));
  const bool relu = act == Act::relu;
  if (relu)
    FRUGAL_CHECK(y.rows() == rows && y.cols() == n, "bias_act_backward: output and gradient shapes differ");
  Args args(*this, "bias_act_backward");
  float* dg = args.inout<float>(grad);
  const float* dy = relu ? args.in<float>(y) : nullptr;
  dev::bias_act_backward(context(), dg, dy, rows, n, relu, args.out<float>(bias_grad));
  args.finish();
}

void CudaBackend::sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act,
                                       Tensor& out) {
  const size_t h = w.cols(), points = x.size();
  FRUGAL_CHECK(bias.size() == h, fmt::format("bias has {} entries, the layer {}", bias.size(), h));
  FRUGAL_CHECK(x.ids.size() == x.values.size(),
               fmt::format("sparse_input_forward: {} feature ids, {} values", x.ids.size(), x.values.size()));
  out.resize(points, h);
  if (points == 0 || h == 0) return;
  Args args(*this, "sparse_input_forward");
  dev::sparse_forward(context(), args.in<uint64_t>(x.offsets), points, args.in<uint32_t>(x.ids),
                      args.in<float>(x.values), args.matrix(w), h, args.in<float>(bias), act == Act::relu,
                      args.out<float>(out));
  args.finish();
}

void CudaBackend::sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre,
                                        RowGrad& grad) {
  FRUGAL_CHECK(grad_pre.rows() == x.size(), fmt::format("sparse_input_backward: {} gradient rows for {} points",
                                                        grad_pre.rows(), x.size()));
  Args args(*this, "sparse_input_backward");
  // The batch's CSR is where the step set it (the layer checked its ids against the weights' rows).
  // The caller listed the rows on the host (core/backend.h): the device's own list stays here, for
  // the optimizer, and nothing comes down.
  const dev::RowEntries in{.offsets = args.in<uint64_t>(x.offsets), .ids = args.in<uint32_t>(x.ids),
                           .samples = x.size(), .entries = x.ids.size(), .on_device = true, .rows_listed = true};
  accumulate(ws, in, x.values, grad_pre, grad, nullptr);
  grad.device_rows_of = grad.rows;
}

void CudaBackend::active_logits(const Tensor& h, const ActiveTensors& active, const Tensor& w, const Tensor& bias,
                                Tensor& logits) {
  const size_t samples = active.num_samples(), entries = active.total(), d = h.cols();
  logits.resize(1, entries);
  if (entries == 0) return;
  FRUGAL_CHECK(h.rows() >= samples && w.cols() == d,
               fmt::format("active_logits: {} x {} inputs for {} samples, weights of {} columns", h.rows(), d,
                           samples, w.cols()));
  FRUGAL_CHECK(active.logit_offsets.empty() || active.logit_offsets.size() == entries,
               "active_logits: one logit offset per entry");
  Args args(*this, "active_logits");
  dev::active_logits(context(), args.in<float>(h), d, args.in<uint64_t>(active.offsets), samples,
                     args.in<uint32_t>(active.ids), entries, args.matrix(w), args.in<float>(bias),
                     active.logit_offsets.empty() ? nullptr : args.in<float>(active.logit_offsets),
                     args.out<float>(logits));
  args.finish();
}

void CudaBackend::active_backward_input(const ActiveTensors& active, const Tensor& dlogits, const Tensor& w,
                                        Tensor& grad_h) {
  const size_t samples = active.num_samples(), d = w.cols();
  FRUGAL_CHECK(dlogits.size() >= active.total(),
               fmt::format("active_backward_input: {} gradients for {} entries", dlogits.size(), active.total()));
  grad_h.resize(samples, d);
  if (samples == 0 || d == 0) return;
  Args args(*this, "active_backward_input");
  dev::active_backward(context(), args.in<uint64_t>(active.offsets), samples, args.in<uint32_t>(active.ids),
                       args.in<float>(dlogits), args.matrix(w), d, args.out<float>(grad_h));
  args.finish();
}

std::unique_ptr<RowWorkspace> CudaBackend::make_row_workspace(size_t num_rows) {
  // No host state: the sort by row runs on the device.
  return std::make_unique<RowWorkspace>(this, num_rows);
}

void CudaBackend::row_accumulate(RowWorkspace& ws, const ActiveTensors& entries, const Tensor& coefs,
                                 const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  FRUGAL_CHECK(!entries.offsets.empty() && entries.num_samples() <= vecs.rows(),
               fmt::format("row_accumulate: {} samples, {} vectors", entries.num_samples(), vecs.rows()));
  FRUGAL_CHECK(coefs.size() == entries.total(),
               fmt::format("row_accumulate: {} coefficients for {} entries", coefs.size(), entries.total()));
  // The caller listed the rows on the host (core/backend.h): the device's list stays here. Sets
  // made on the device (grad.rows_on_device): the list stays here alone, only its count comes down.
  Args args(*this, "row_accumulate");
  const dev::RowEntries in{.offsets = args.in<uint64_t>(entries.offsets), .ids = args.in<uint32_t>(entries.ids),
                           .samples = entries.num_samples(), .entries = entries.total(), .on_device = true,
                           .rows_listed = !grad.rows_on_device, .rows_stay = grad.rows_on_device};
  accumulate(ws, in, coefs, vecs, grad, bias_grad);
  grad.device_rows_of = grad.rows;
}

void CudaBackend::accumulate(RowWorkspace& ws, const dev::RowEntries& in, const Tensor& coefs, const Tensor& vecs,
                             RowGrad& grad, RowGrad* bias_grad) {
  FRUGAL_CHECK(ws.owner() == this, "cuda backend: the row workspace was made by another backend");
  const size_t d = vecs.cols();
  Args args(*this, "row_accumulate");
  const float* dcoefs = args.in<float>(coefs);
  const float* dvecs = args.in<float>(vecs);
  keep_on(grad.values, *this);
  if (bias_grad != nullptr) keep_on(bias_grad->values, *this);
  // The sort by row, the distinct rows and their sums all run on the device (gpu/cuda_kernels.h);
  // the sums stay there, the row list comes down (RowGrad's rows are host memory).
  keep_on(grad.device_rows_tensor, *this);
  const auto prepare = [&](size_t nrows) {
    grad.values.resize(nrows, d);
    dev::RowSumsOut out{reinterpret_cast<float*>(grad.values.device_data()), nullptr, nullptr};
    grad.device_rows_tensor.resize(1, nrows);
    out.row_ids = reinterpret_cast<uint32_t*>(grad.device_rows_tensor.device_data());
    if (bias_grad != nullptr) {
      bias_grad->values.resize(nrows, 1);
      out.bias = reinterpret_cast<float*>(bias_grad->values.device_data());
    }
    return out;
  };
  dev::row_accumulate(context(), in, dcoefs, ws.num_rows(), dvecs, d, grad.rows, prepare);
  if (bias_grad != nullptr) {
    bias_grad->rows = grad.rows;
    bias_grad->rows_on_device = grad.rows_on_device;
    // The bias's update reads the same list, on the device.
    keep_on(bias_grad->device_rows_tensor, *this);
    bias_grad->device_rows_tensor.resize(1, grad.device_rows_tensor.size());
    copy_rows(bias_grad->device_rows_tensor, 0, grad.device_rows_tensor, 0, 1);
    bias_grad->device_rows_of = grad.rows;
  }
  args.finish();
}

namespace {
// The shapes the softmax ops rely on, checked from the tensors' sizes (their contents stay on the
// device: the trainer made them).
void check_xent(const XentTensors& batch, const Tensor& z, const char* op) {
  FRUGAL_CHECK(batch.offsets != nullptr && batch.pos_offsets != nullptr && batch.label_offsets != nullptr,
               fmt::format("{}: the batch's offsets, position offsets and label offsets are all needed", op));
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(batch.offsets->dtype() == Dtype::u64 && batch.pos_offsets->dtype() == Dtype::u64 &&
                   batch.label_offsets->dtype() == Dtype::u64 &&
                   (batch.positions == nullptr || batch.positions->dtype() == Dtype::u32) && z.dtype() == Dtype::f32,
               fmt::format("{}: u64 offsets, u32 positions and f32 logits", op));
  FRUGAL_CHECK(batch.pos_offsets->size() == b + 1 && batch.label_offsets->size() == b + 1,
               fmt::format("{}: {} samples, {} position offsets, {} label offsets", op, b,
                           batch.pos_offsets->size(), batch.label_offsets->size()));
}
}  // namespace

// The labels' positions where the kernels read them; null: the labels are each sample's first logits.
const uint32_t* CudaBackend::positions(Args& args, const XentTensors& batch) {
  return batch.positions != nullptr ? args.in<uint32_t>(*batch.positions) : nullptr;
}

void CudaBackend::xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) {
  check_xent(batch, z, "xent_max");
  const size_t b = batch.num_samples();
  max.resize(1, b);
  Args args(*this, "xent_max");
  dev::xent_max(context(), args.in<float>(z), args.in<uint64_t>(*batch.offsets), b, args.out<float>(max));
  args.finish();
}

void CudaBackend::xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) {
  check_xent(batch, z, "xent_sums");
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b, "xent_sums: one maximum per sample");
  sums.resize(1, 2 * b);
  Args args(*this, "xent_sums");
  dev::xent_sums(context(), args.in<float>(z), args.in<uint64_t>(*batch.offsets),
                 args.in<uint64_t>(*batch.pos_offsets), positions(args, batch), b, args.in<float>(max),
                 args.out<float>(sums));
  args.finish();
}

void CudaBackend::xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                                 Tensor& losses) {
  check_xent(batch, z, "xent_loss_grad");
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b && sums.size() == 2 * b, "xent_loss_grad: one maximum and two sums per sample");
  FRUGAL_CHECK(losses.dtype() == Dtype::f64, "xent_loss_grad: the losses are f64");
  losses.resize(1, b);
  Args args(*this, "xent_loss_grad");
  dev::xent_loss_grad(context(), args.inout<float>(z), args.in<uint64_t>(*batch.offsets),
                      args.in<uint64_t>(*batch.pos_offsets), positions(args, batch),
                      args.in<uint64_t>(*batch.label_offsets), b, args.in<float>(max), args.in<float>(sums),
                      batch.grad_scale, args.out<double>(losses));
  args.finish();
}

void CudaBackend::top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) {
  FRUGAL_CHECK(in.scores != nullptr, "top_k: no scores");
  FRUGAL_CHECK(labels.dtype() == Dtype::u32 && scores.dtype() == Dtype::f32, "top_k: u32 labels and f32 scores");
  FRUGAL_CHECK(in.offsets != nullptr ? in.offsets->size() == in.rows + 1 : in.scores->size() == in.rows * in.width,
               fmt::format("top_k: {} rows of candidates, {} scores", in.rows, in.scores->size()));
  labels.resize(in.rows, k);
  scores.resize(in.rows, k);
  if (k == 0 || in.rows == 0) return;
  Args args(*this, "top_k");
  const float* bias = nullptr;
  if (in.bias != nullptr) bias = args.in<float>(*in.bias) + in.bias_offset;
  dev::top_k(context(), in.rows, args.in<float>(*in.scores), in.offsets != nullptr ? args.in<uint64_t>(*in.offsets) : nullptr,
             in.width, in.ids != nullptr ? args.in<uint32_t>(*in.ids) : nullptr, bias, in.label_base, k,
             args.out<uint32_t>(labels), args.out<float>(scores));
  args.finish();
}

void CudaBackend::optimizer_rows(const RowUpdate& u, Op op) {
  // (Row-wise Adam takes Adam's counts, corrections and plans, with v one f32 per row.)
  const bool adam = op == Op::adam_rows || op == Op::rowwise_adam_rows,
             row_wise = op == Op::rowwise_adagrad_rows || op == Op::rowwise_adam_rows;
  u.validate(adam, row_wise);
  const size_t n = u.num_rows(), cols = u.w->cols();
  if (n == 0 || cols == 0) return;
  const bool bf16 = u.w->dtype() == Dtype::bf16;
  Args args(*this, op_name(op).data());
  dev::OptimRows r;
  r.n = n;
  r.cols = cols;
  r.bf16 = bf16;  // the weights' (row-wise state is always f32)
  r.rows = u.all_rows ? nullptr : u.rows.data();
  if (u.row_ids != nullptr) {  // the gradient's own list, already here
    FRUGAL_CHECK(u.row_ids->owner() == this, "cuda backend: the optimizer's row list is another backend's");
    r.rows = reinterpret_cast<const uint32_t*>(u.row_ids->device_data());
    r.rows_on_device = true;
  }
  r.round_seed = u.round_seed;
  r.row_base = u.row_base;
  r.col_base = static_cast<uint32_t>(u.col_base);
  r.grad = u.grad != nullptr ? args.in<float>(*u.grad) : nullptr;
  r.keep = u.keep;
  r.beta1 = u.beta1;
  r.beta2 = u.beta2;
  r.eps = u.eps;
  r.lr = u.lr;
  r.momentum = u.momentum;
  std::vector<uint8_t> has_plan;
  std::vector<float> plan, terms;
  std::vector<uint32_t> term_start;
  if (!u.plans.empty()) {
    has_plan.assign(n, 0);
    plan.assign(4 * n, 0.0f);
    term_start.assign(n + 1, 0);
    for (size_t j = 0; j < n; ++j) {
      const CatchUpPlan* p = u.plans[j];
      if (p != nullptr) {
        has_plan[j] = 1;
        plan[4 * j] = p->decay;
        plan[4 * j + 1] = p->move;
        plan[4 * j + 2] = p->m_decay;
        plan[4 * j + 3] = p->v_decay;
        if (adam) terms.insert(terms.end(), p->terms, p->terms + 2 * size_t{p->terms_count});
      }
      term_start[j + 1] = static_cast<uint32_t>(terms.size() / 2);
    }
    r.has_plan = has_plan.data();
    r.plan = plan.data();
    r.term_start = term_start.data();
    r.terms = terms.data();
  }
  if (adam && u.grad != nullptr) {
    // Checked against the table by validate(); all_rows: one count for every row.
    if (u.all_rows) {
      r.count_all = u.counts[0];
    } else if (u.row_counts != nullptr) {  // raised on the device from its own per-row counts
      FRUGAL_CHECK(u.row_counts->owner() == this, "cuda backend: the optimizer's update counts are another backend's");
      r.row_counts = reinterpret_cast<uint32_t*>(u.row_counts->device_data());
    } else {
      r.counts = u.counts.data();
    }
    r.corrections = args.in<float>(*u.corrections);
    r.freeze_after = u.freeze_after;
  }
  r.w = args.inout<std::byte>(*u.w);
  r.m = u.m->empty() ? nullptr : args.inout<std::byte>(*u.m);  // row-wise Adam without momentum: none
  r.v = adam ? args.inout<std::byte>(*u.v) : nullptr;
  if (op == Op::rowwise_adam_rows)
    dev::rowwise_adam_rows(context(), r);
  else if (adam)
    dev::adam_rows(context(), r);
  else if (op == Op::sgd_rows)
    dev::sgd_rows(context(), r);
  else if (row_wise)
    dev::rowwise_adagrad_rows(context(), r);
  else
    dev::adagrad_rows(context(), r);
  args.finish();
}

void CudaBackend::adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::adam_rows); }
void CudaBackend::sgd_rows(const RowUpdate& u) { optimizer_rows(u, Op::sgd_rows); }
void CudaBackend::adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::adagrad_rows); }
void CudaBackend::rowwise_adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::rowwise_adagrad_rows); }
void CudaBackend::rowwise_adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::rowwise_adam_rows); }

void CudaBackend::simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                                Tensor& codes) {
  FRUGAL_CHECK(spec.planes != nullptr && spec.planes->rows() == spec.tables * spec.k &&
                   spec.planes->cols() == x.cols() && spec.planes->dtype() == Dtype::f32,
               fmt::format("SimHash: {} x {} planes for {} tables of {} bits over {} dimensions",
                           spec.planes == nullptr ? 0 : spec.planes->rows(),
                           spec.planes == nullptr ? 0 : spec.planes->cols(), spec.tables, spec.k, x.cols()));
  for (const uint32_t r : rows) FRUGAL_CHECK(r < x.rows(), fmt::format("LSH: row {} of a {}-row matrix", r, x.rows()));
  const size_t n = rows.empty() ? x.rows() : rows.size();
  uint32_t* out = shaped_codes(codes, n, spec.tables, "simhash_codes");
  if (n == 0 || spec.tables == 0) return;
  Args args(*this, "simhash_codes");
  dev::simhash(context(), args.in<float>(*spec.planes), spec.tables, spec.k, args.matrix(x),
               rows.empty() ? nullptr : rows.data(), n, x.cols(), out, codes.owner() == this);
  args.finish();
}

void CudaBackend::dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) {
  const size_t bins = spec.tables * spec.k;
  FRUGAL_CHECK(spec.coords.size() == bins * spec.bin_size,
               fmt::format("DWTA: {} coordinates for {} bins of {}", spec.coords.size(), bins, spec.bin_size));
  for (const uint32_t c : spec.coords)
    FRUGAL_CHECK(c < x.cols(), fmt::format("DWTA: coordinate {} of {}-dimensional vectors", c, x.cols()));
  for (const uint32_t r : rows) FRUGAL_CHECK(r < x.rows(), fmt::format("LSH: row {} of a {}-row matrix", r, x.rows()));
  const size_t n = rows.empty() ? x.rows() : rows.size();
  const dev::DwtaParams p{.tables = spec.tables, .k = spec.k, .bin_size = spec.bin_size, .bin_bits = spec.bin_bits,
                          .bucket_bits = spec.bucket_bits, .max_bucket_bits = spec.max_bucket_bits,
                          .seed = spec.seed};
  uint32_t* out = shaped_codes(codes, n, spec.tables, "dwta_codes");
  if (n == 0 || spec.tables == 0) return;
  Args args(*this, "dwta_codes");
  const bool placed = spec.placed_coords != nullptr && spec.placed_coords->owner() == this &&
                      spec.placed_coords->size() == spec.coords.size();
  dev::dwta(context(), p, placed ? args.in<uint32_t>(*spec.placed_coords) : spec.coords.data(), placed, args.matrix(x),
            rows.empty() ? nullptr : rows.data(), n, x.cols(), out, codes.owner() == this);
  args.finish();
}

uint32_t* CudaBackend::shaped_codes(Tensor& codes, size_t n, size_t tables, const char* op) {
  FRUGAL_CHECK(codes.dtype() == Dtype::u32 && (codes.owner() == this || codes.is_host()),
               fmt::format("cuda {}: the codes are {} on {}, not u32 here or in host memory", op,
                           dtype_name(codes.dtype()), codes.device().name()));
  codes.resize(n, tables);
  return reinterpret_cast<uint32_t*>(codes.device_data());
}

CudaBackend::DeviceBuckets& CudaBackend::device_buckets(const BucketTables& tables) {
  const size_t nt = tables.num_tables();
  size_t total = 0;
  for (size_t t = 0; t < nt; ++t) total += tables.ids[t].size();
  DeviceBuckets& d = buckets_[tables.owner];
  // The generation names the contents; the shape is checked too, so that tables of another shape
  // at a reused address are never read through an old copy.
  if (d.generation == tables.generation && d.buckets == tables.buckets && d.tables == nt && d.total == total &&
      !d.offsets.empty())
    return d;
  d = DeviceBuckets{};
  uint64_t max_entries = 0;
  for (size_t t = 0; t < nt; ++t) {
    uint32_t largest = 0;
    for (uint32_t b = 0; b < tables.buckets; ++b)
      largest = std::max(largest, tables.offsets[t][b + 1] - tables.offsets[t][b]);
    max_entries += largest;
  }
  FRUGAL_CHECK(total < 0xffffffffu && max_entries < 0x7fffffffu,
               fmt::format("bucket_union: {} table entries, beyond the device layout's 32-bit offsets", total));
  // The flat layout: every table's offsets shifted by where its ids start among all ids.
  std::vector<uint32_t> offsets, ids;
  offsets.reserve(nt * (size_t{tables.buckets} + 1));
  ids.reserve(total);
  for (size_t t = 0; t < nt; ++t) {
    const auto base = static_cast<uint32_t>(ids.size());
    for (const uint32_t o : tables.offsets[t]) offsets.push_back(base + o);
    ids.insert(ids.end(), tables.ids[t].begin(), tables.ids[t].end());
  }
  d.offsets = Tensor(0, 0, Dtype::u32, *this);
  d.ids = Tensor(0, 0, Dtype::u32, *this);
  assign_values(d.offsets, std::span<const uint32_t>(offsets));
  assign_values(d.ids, std::span<const uint32_t>(ids));
  d.max_entries = static_cast<uint32_t>(max_entries);
  d.generation = tables.generation;
  d.buckets = tables.buckets;
  d.tables = nt;
  d.total = total;
  return d;
}

void CudaBackend::bucket_union(const BucketTables& tables, const BucketInput& q, ActiveTensors& out) {
  const size_t nt = tables.num_tables();
  q.validate(nt);
  for (Tensor* t : {&out.offsets, &out.ids}) keep_on(*t, *this);
  out.logit_offsets.resize(0, 0);
  // Tables built here (bucket_build) are read where they are, each table's ids in a row of its
  // own; host tables through the device copy kept per generation.
  const uint32_t *offsets = nullptr, *ids = nullptr;
  uint64_t ids_stride = 0;
  uint32_t max_entries = 0;
  if (tables.built()) {
    FRUGAL_CHECK(tables.built_offsets->owner() == this && tables.built_ids->owner() == this,
                 "cuda bucket_union: the tables were built on another backend");
    offsets = reinterpret_cast<const uint32_t*>(tables.built_offsets->device_data());
    ids = reinterpret_cast<const uint32_t*>(tables.built_ids->device_data());
    ids_stride = tables.neurons;
    // A sample reads at most a full bucket per table.
    max_entries = static_cast<uint32_t>(std::min<uint64_t>(
        0x7fffffffu, uint64_t{nt} * std::min<uint64_t>(tables.capacity, tables.neurons)));
  } else {
    const DeviceBuckets& d = device_buckets(tables);
    offsets = reinterpret_cast<const uint32_t*>(d.offsets.device_data());
    ids = reinterpret_cast<const uint32_t*>(d.ids.device_data());
    max_entries = d.max_entries;
  }
  {
    Args args(*this, "bucket_union");
    uint64_t* scanned = nullptr;
    if (q.scanned != nullptr) {
      q.scanned->resize(1, q.samples);
      scanned = args.out<uint64_t>(*q.scanned);
    }
    out.offsets.resize(1, q.samples + 1);
    const auto shape = [&](size_t total) {
      out.ids.resize(1, total);
      return reinterpret_cast<uint32_t*>(out.ids.device_data());
    };
    if (dev::bucket_union(context(), offsets, ids, ids_stride, tables.buckets, static_cast<uint32_t>(nt), max_entries,
                          args.in<uint32_t>(*q.codes), q.samples,
                          args.in<uint64_t>(*q.label_offsets), args.in<uint32_t>(*q.labels), q.labels->size(), q.cap,
                          scanned, reinterpret_cast<uint64_t*>(out.offsets.device_data()), shape)) {
      args.finish();
      return;
    }
  }
  // Buckets holding more entries per sample than a block's shared memory: the host backend's union
  // over host copies of the query (the CPU's: the same result), its sets sent back up.
  const Tensor codes = to_host(*q.codes), label_offsets = to_host(*q.label_offsets), labels = to_host(*q.labels);
  Tensor scanned(0, 0, Dtype::u64);
  ActiveTensors host;
  host_backend().bucket_union(tables,
                              {.samples = q.samples, .codes = &codes, .label_offsets = &label_offsets,
                               .labels = &labels, .cap = q.cap, .scanned = q.scanned != nullptr ? &scanned : nullptr},
                              host);
  if (q.scanned != nullptr) q.scanned->assign(scanned);
  out.offsets.assign(host.offsets);
  out.ids.assign(host.ids);
}

double CudaBackend::sum_squares(const Tensor& x) {
  FRUGAL_CHECK(x.dtype() == Dtype::f32, fmt::format("sum_squares: {} is {}, not f32", tensor_words(x), dtype_name(x.dtype())));
  if (x.empty()) return 0.0;
  Args args(*this, "sum_squares");
  const double sum = dev::sum_squares(context(), args.in<float>(x), x.size(), kSquaresChunk);
  args.finish();
  return sum;
}

void CudaBackend::scale(Tensor& x, float factor) {
  FRUGAL_CHECK(x.dtype() == Dtype::f32, fmt::format("scale: {} is {}, not f32", tensor_words(x), dtype_name(x.dtype())));
  if (x.empty()) return;
  Args args(*this, "scale");
  dev::scale(context(), args.inout<float>(x), x.size(), factor);
  args.finish();
}

void CudaBackend::ranking_add(const RankingTensors& in, RankingState& state) {
  const RankingShape shape = in.validate(state);
  if (shape.rows == 0) return;
  Args args(*this, "ranking_add");
  const ranking::Spec spec{.ks = args.in<uint64_t>(*in.ks), .num_ks = shape.num_ks, .max_k = shape.max_k,
                           .discounts = args.in<double>(*in.discounts),
                           .inverse = in.inverse != nullptr ? args.in<double>(*in.inverse) : nullptr,
                           .num_inverse = in.inverse != nullptr ? in.inverse->size() : 0, .unseen = in.unseen};
  dev::ranking_add(context(), spec, args.in<uint32_t>(*in.top), shape.rows, shape.width,
                   args.in<uint64_t>(*in.label_offsets) + in.first_row, args.in<uint32_t>(*in.labels),
                   in.labels->size(), args.inout<double>(state.sums), args.inout<uint32_t>(state.covered),
                   args.inout<uint32_t>(state.relevant), args.inout<uint64_t>(state.counts), shape.labels);
  args.finish();
}

void CudaBackend::bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids) {
  FRUGAL_CHECK(b.codes != nullptr && b.codes->dtype() == Dtype::u32,
               "bucket_build: the codes must be a u32 tensor (neurons x tables)");
  FRUGAL_CHECK(b.buckets >= 1 && b.capacity >= 1,
               fmt::format("bucket_build: {} buckets of capacity {}", b.buckets, b.capacity));
  const size_t n = b.codes->rows(), nt = b.codes->cols();
  for (Tensor* t : {&offsets, &ids}) keep_on(*t, *this);
  offsets.resize(nt, size_t{b.buckets} + 1);
  ids.resize(nt, n);
  Args args(*this, "bucket_build");
  dev::bucket_build(context(), args.in<uint32_t>(*b.codes), n, nt, b.buckets, b.capacity, b.seed,
                    reinterpret_cast<uint32_t*>(offsets.device_data()), reinterpret_cast<uint32_t*>(ids.device_data()));
  args.finish();
}

void CudaBackend::active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out) {
  e.validate();
  FRUGAL_CHECK(in.logit_offsets.empty(), "active_extend: the sets to extend already have logit offsets");
  const size_t samples = in.num_samples();
  for (Tensor* t : {&out.offsets, &out.ids, &out.logit_offsets}) keep_on(*t, *this);
  Args args(*this, "active_extend");
  const bool draws = e.draws > 0;
  const active_extend::Spec spec{
      .rng_state = e.rng_state, .neurons = e.neurons, .min_active = e.min_active, .cap = e.cap, .draws = e.draws,
      .logq = e.logq, .threshold = draws ? args.in<float>(*e.threshold) : nullptr,
      .alias = draws ? args.in<uint32_t>(*e.alias) : nullptr, .log_prob = draws ? args.in<double>(*e.log_prob) : nullptr,
      .log_count = draws ? args.in<double>(*e.log_count) : nullptr};
  out.offsets.resize(1, samples + 1);
  const auto shape = [&](size_t total) {
    out.ids.resize(1, total);
    out.logit_offsets.resize(1, draws ? total : 0);
    return dev::ExtendOut{reinterpret_cast<uint32_t*>(out.ids.device_data()),
                          draws ? reinterpret_cast<float*>(out.logit_offsets.device_data()) : nullptr};
  };
  dev::active_extend(context(), spec, args.in<uint64_t>(in.offsets), args.in<uint32_t>(in.ids), samples, in.total(),
                     reinterpret_cast<uint64_t*>(out.offsets.device_data()), shape);
  args.finish();
}

}  // namespace frugal::gpu
