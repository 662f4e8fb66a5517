// The CUDA Backend's host half: argument checks, the host-side preparation (sorting entries by
// row, flattening catch-up plans), the device copies of the model tensors (a DeviceMirror over
// CUDA memory) and the calls into gpu/cuda_kernels.cu. Compiled by the host compiler: no CUDA header.
#include "gpu/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/device_mirror.h"
#include "core/hash32.h"
#include "gpu/cuda_info.h"
#include "gpu/cuda_kernels.h"

namespace frugal::gpu {
namespace {

// Every id below limit (the rows of the matrix an op reads).
void check_ids(const uint32_t* ids, size_t n, size_t limit, const char* what) {
  for (size_t e = 0; e < n; ++e)
    FRUGAL_CHECK(ids[e] < limit,
                 fmt::format("{}: row id {} out of range (the matrix has {} rows)", what, ids[e], limit));
}

// Rows `rows` of t (every row when rows is empty), one after another, widened to f32.
std::vector<float> gather_rows(const Tensor& t, std::span<const uint32_t> rows) {
  const size_t n = rows.empty() ? t.rows() : rows.size();
  std::vector<float> out(n * t.cols());
  for (size_t j = 0; j < n; ++j) t.read_row(rows.empty() ? j : rows[j], out.data() + j * t.cols());
  return out;
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

// CUDA memory for the backend's DeviceMirror (core/device_mirror.h).
class CudaMemory : public DeviceMirror::Memory {
 public:
  explicit CudaMemory(dev::Context& ctx) : ctx_(ctx) {}
  void* allocate(const Tensor&, size_t bytes) override { return dev::device_alloc(ctx_, bytes); }
  void release(void* device) noexcept override { dev::device_free(ctx_, device); }
  void upload(void* device, const void* host, size_t bytes) override { dev::upload(ctx_, device, host, bytes); }
  void download(void* host, const void* device, size_t bytes) override { dev::download(ctx_, host, device, bytes); }

 private:
  dev::Context& ctx_;
};

CudaBackend::CudaBackend() = default;
// The registry keeps its backends until the process exits, when the CUDA runtime may already be
// torn down (its exit handlers run first): freeing device memory or destroying the cuBLAS handle then
// is not safe, so the context is left to the process's end, which releases everything anyway.
CudaBackend::~CudaBackend() = default;

dev::Context& CudaBackend::context() {
  if (ctx_ == nullptr) {
    ctx_ = dev::context_create();
    // Left to the process's end with the context (see the destructor).
    memory_ = new CudaMemory(*ctx_);
    mirror_ = new DeviceMirror(*memory_);
  }
  return *ctx_;
}

dev::Matrix CudaBackend::resident_matrix(const Tensor& t) {
  context();
  return {mirror_->acquire(t), true, t.dtype() == Dtype::bf16};
}

dev::In<float> CudaBackend::resident(const Tensor& t) {
  (void)t.data();  // f32 only: throws naming the dtype otherwise
  context();
  return {static_cast<const float*>(mirror_->acquire(t)), true};
}

dev::In<float> CudaBackend::resident_range(const float* p, size_t floats) {
  context();
  const void* d = p != nullptr ? mirror_->find_range(p, floats * sizeof(float)) : nullptr;
  return d != nullptr ? dev::In<float>{static_cast<const float*>(d), true} : dev::In<float>{p, false};
}

void CudaBackend::flush_state() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mirror_ != nullptr) mirror_->flush();
}

std::optional<uint64_t> CudaBackend::state_memory_available() const {
  // The model state is held twice: on the host (the reference copy) and on the device.
  const std::optional<uint64_t> host = Backend::state_memory_available();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& self = const_cast<CudaBackend&>(*this);
  const uint64_t device = dev::free_bytes(self.context()) + self.mirror_->bytes();
  return host.has_value() ? std::min(*host, device) : device;
}

size_t CudaBackend::resident_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mirror_ != nullptr ? mirror_->bytes() : 0;
}

bool CudaBackend::supports(Op) const { return true; }

void CudaBackend::synchronize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ctx_ != nullptr) dev::synchronize(*ctx_);
}

void CudaBackend::set_num_threads(int threads) {
  FRUGAL_CHECK(threads >= 0, "the thread count must be >= 0");
  threads_ = threads;
}

void CudaBackend::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate) {
  const MatmulShape s = matmul_shape(a, trans_a, b, trans_b, c);
  std::lock_guard<std::mutex> lock(mutex_);
  // Operands with a current device copy (a dense layer's or an exact softmax's weights) are read there.
  const dev::In<float> da = resident_range(a.data(), static_cast<size_t>(s.m * s.k));
  const dev::In<float> db = resident_range(b.data(), static_cast<size_t>(s.k * s.n));
  dev::matmul(context(), da, trans_a, db, trans_b, c.data(), s.m, s.n, s.k, accumulate, bf16_products_);
}

bool CudaBackend::set_bf16_products(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  bf16_products_ = on;
  return true;
}

void CudaBackend::bias_act_forward(Tensor& y, const Tensor& bias, Act act) {
  FRUGAL_CHECK(bias.size() == y.cols(),
               fmt::format("bias has {} entries, the output {} columns", bias.size(), y.cols()));
  if (y.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  dev::bias_act_forward(context(), y.data(), y.rows(), y.cols(), resident(bias), act == Act::relu);
}

void CudaBackend::bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  const size_t rows = grad.rows(), n = grad.cols();
  FRUGAL_CHECK(bias_grad.size() == n,
               fmt::format("bias gradient has {} entries, the output {} columns", bias_grad.size(), n));
  const bool relu = act == Act::relu;
  if (relu)
    FRUGAL_CHECK(y.rows() == rows && y.cols() == n, "bias_act_backward: output and gradient shapes differ");
  std::lock_guard<std::mutex> lock(mutex_);
  dev::bias_act_backward(context(), grad.data(), relu ? y.data() : nullptr, rows, n, relu, bias_grad.data());
}

void CudaBackend::sparse_input_forward(const SparseFeatures& features, const Tensor& w, const Tensor& bias, Act act,
                                       Tensor& out) {
  const SparseView x = features.host();
  const size_t h = w.cols();
  FRUGAL_CHECK(bias.size() == h, fmt::format("bias has {} entries, the layer {}", bias.size(), h));
  out.resize(x.size(), h);
  if (x.size() == 0 || h == 0) return;
  check_ids(x.ids.data(), x.ids.size(), w.rows(), "sparse_input_forward");
  std::lock_guard<std::mutex> lock(mutex_);
  dev::sparse_forward(context(), x.offsets.data(), x.size(), x.ids.data(), x.values.data(), resident_matrix(w),
                      w.rows(), h, resident(bias), act == Act::relu, out.data());
}

void CudaBackend::sparse_input_backward(RowWorkspace& ws, const SparseFeatures& features, const Tensor& grad_pre,
                                        RowGrad& grad) {
  const SparseView x = features.host();
  FRUGAL_CHECK(grad_pre.rows() == x.size(), fmt::format("sparse_input_backward: {} gradient rows for {} points",
                                                        grad_pre.rows(), x.size()));
  accumulate(ws, x.offsets, x.ids.data(), x.values.data(), grad_pre, grad, nullptr);
}

void CudaBackend::active_logits(const Tensor& h, const ActiveSets& active, const Tensor& w, const Tensor& bias,
                                Tensor& logits) {
  const size_t samples = active.num_samples(), entries = active.total(), d = h.cols();
  logits.resize(1, entries);
  if (entries == 0) return;
  FRUGAL_CHECK(h.rows() >= samples && w.cols() == d,
               fmt::format("active_logits: {} x {} inputs for {} samples, weights of {} columns", h.rows(), d,
                           samples, w.cols()));
  FRUGAL_CHECK(active.logit_offsets.empty() || active.logit_offsets.size() == entries,
               "active_logits: one logit offset per entry");
  check_ids(active.ids.data(), entries, std::min(w.rows(), bias.size()), "active_logits");
  std::vector<uint32_t> sample(entries);
  for (size_t i = 0; i < samples; ++i)
    std::fill(sample.begin() + static_cast<std::ptrdiff_t>(active.offsets[i]),
              sample.begin() + static_cast<std::ptrdiff_t>(active.offsets[i + 1]), static_cast<uint32_t>(i));
  std::lock_guard<std::mutex> lock(mutex_);
  dev::active_logits(context(), h.data(), samples, d, sample.data(), active.ids.data(), entries, resident_matrix(w),
                     resident(bias), w.rows(), bias.size(), active.logit_offsets.empty() ? nullptr : active.logit_offsets.data(),
                     logits.data());
}

void CudaBackend::active_backward_input(const ActiveSets& active, const Tensor& dlogits_tensor, const Tensor& w,
                                        Tensor& grad_h) {
  const std::span<const float> dlogits = dlogits_tensor.span();
  const size_t samples = active.num_samples(), d = w.cols();
  FRUGAL_CHECK(dlogits.size() >= active.total(),
               fmt::format("active_backward_input: {} gradients for {} entries", dlogits.size(), active.total()));
  grad_h.resize(samples, d);
  if (samples == 0 || d == 0) return;
  check_ids(active.ids.data(), active.total(), w.rows(), "active_backward_input");
  std::lock_guard<std::mutex> lock(mutex_);
  dev::active_backward(context(), active.offsets.data(), samples, active.ids.data(), dlogits.data(),
                       resident_matrix(w), w.rows(), d, grad_h.data());
}

std::unique_ptr<RowWorkspace> CudaBackend::make_row_workspace(size_t num_rows) {
  // No host state: the sort by row runs on the device.
  return std::make_unique<RowWorkspace>(this, num_rows);
}

void CudaBackend::row_accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids,
                                 const Tensor& coefs, const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  FRUGAL_CHECK(!offsets.empty() && offsets.size() - 1 <= vecs.rows(),
               fmt::format("row_accumulate: {} samples, {} vectors", offsets.size() - 1, vecs.rows()));
  FRUGAL_CHECK(coefs.size() == offsets.back(),
               fmt::format("row_accumulate: {} coefficients for {} entries", coefs.size(), offsets.back()));
  accumulate(ws, offsets, ids, coefs.data(), vecs, grad, bias_grad);
}

void CudaBackend::accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids,
                             const float* coefs, const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  FRUGAL_CHECK(ws.owner() == this, "cuda backend: the row workspace was made by another backend");
  const size_t samples = offsets.size() - 1, d = vecs.cols();
  const uint64_t entries = offsets.back();
  for (uint64_t e = 0; e < entries; ++e)
    FRUGAL_CHECK(ids[e] < ws.num_rows(),
                 fmt::format("row id {} out of range (layer has {} rows)", ids[e], ws.num_rows()));
  // The sort by row, the distinct rows and their sums all run on the device (gpu/cuda_kernels.h).
  const auto prepare = [&](size_t nrows) {
    grad.values.resize(nrows, d);
    dev::RowSumsOut out{grad.values.data(), nullptr};
    if (bias_grad != nullptr) {
      bias_grad->values.resize(nrows, 1);
      out.bias = bias_grad->values.data();
    }
    return out;
  };
  std::lock_guard<std::mutex> lock(mutex_);
  dev::row_accumulate(context(), offsets.data(), samples, ids, coefs, ws.num_rows(), vecs.data(), d, grad.rows,
                      prepare);
  if (bias_grad != nullptr) bias_grad->rows = grad.rows;
}

void CudaBackend::xent_max(const Tensor& z_tensor, const XentTensors& batch_tensors, Tensor& max_tensor) {
  const XentBatch batch = batch_tensors.host();
  const std::span<const float> z = z_tensor.span();
  max_tensor.resize(1, batch.num_samples());
  const std::span<float> max = max_tensor.span();
  batch.validate(z.size());
  std::lock_guard<std::mutex> lock(mutex_);
  dev::xent_max(context(), z.data(), z.size(), batch.offsets.data(), batch.num_samples(), max.data());
}

void CudaBackend::xent_sums(const Tensor& z_tensor, const XentTensors& batch_tensors, const Tensor& max_tensor,
                            Tensor& sums_tensor) {
  const XentBatch batch = batch_tensors.host();
  const std::span<const float> z = z_tensor.span(), max = max_tensor.span();
  sums_tensor.resize(1, 2 * batch.num_samples());
  const std::span<float> sums = sums_tensor.span();
  batch.validate(z.size());
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b && sums.size() == 2 * b, "xent_sums: one maximum and two sums per sample");
  FRUGAL_CHECK(batch.positions.size() >= batch.pos_offsets.back(), "xent_sums: positions missing");
  std::lock_guard<std::mutex> lock(mutex_);
  dev::xent_sums(context(), z.data(), z.size(), batch.offsets.data(), batch.pos_offsets.data(),
                 batch.positions.data(), b, max.data(), sums.data());
}

void CudaBackend::xent_loss_grad(Tensor& z_tensor, const XentTensors& batch_tensors, const Tensor& max_tensor,
                                 const Tensor& sums_tensor, Tensor& losses_tensor) {
  const XentBatch batch = batch_tensors.host();
  const std::span<float> z = z_tensor.span();
  const std::span<const float> max = max_tensor.span(), sums = sums_tensor.span();
  losses_tensor.resize(1, batch.num_samples());
  const std::span<double> losses = losses_tensor.f64();
  batch.validate(z.size());
  const size_t b = batch.num_samples();
  FRUGAL_CHECK(max.size() == b && sums.size() == 2 * b && losses.size() == b,
               "xent_loss_grad: one maximum, two sums and one loss per sample");
  FRUGAL_CHECK(batch.positions.size() >= batch.pos_offsets.back(), "xent_loss_grad: positions missing");
  std::lock_guard<std::mutex> lock(mutex_);
  dev::xent_loss_grad(context(), z.data(), z.size(), batch.offsets.data(), batch.pos_offsets.data(),
                      batch.positions.data(), batch.label_offsets.data(), b, max.data(), sums.data(), batch.grad_scale,
                      losses.data());
}

void CudaBackend::top_k(const TopKInput& input, size_t k, Tensor& label_tensor, Tensor& score_tensor) {
  label_tensor.resize(input.rows, k);
  score_tensor.resize(input.rows, k);
  const TopKRows in = input.host();
  const std::span<uint32_t> labels = label_tensor.u32();
  const std::span<float> scores = score_tensor.span();
  if (k == 0 || in.rows == 0) return;
  // Dense rows become CSR rows of `width` candidates.
  std::vector<uint64_t> dense_offsets;
  const uint64_t* offsets = in.offsets;
  if (offsets == nullptr) {
    dense_offsets.resize(in.rows + 1);
    for (size_t i = 0; i <= in.rows; ++i) dense_offsets[i] = i * in.width;
    offsets = dense_offsets.data();
  }
  // The bias entries the candidates' labels reach.
  size_t bias_size = 0;
  if (in.bias != nullptr) {
    if (in.ids != nullptr) {
      for (uint64_t e = 0; e < offsets[in.rows]; ++e) bias_size = std::max<size_t>(bias_size, in.ids[e] + size_t{1});
    } else {
      for (size_t i = 0; i < in.rows; ++i) bias_size = std::max<size_t>(bias_size, offsets[i + 1] - offsets[i]);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  dev::top_k(context(), in.rows, in.scores, offsets, in.ids, resident_range(in.bias, bias_size), bias_size,
             in.label_base, k, labels.data(), scores.data());
}

void CudaBackend::optimizer_rows(const RowUpdate& u, Op op) {
  const bool adam = op == Op::adam_rows;
  u.validate(adam);
  const size_t n = u.rows.size(), cols = u.w->cols();
  if (n == 0 || cols == 0) return;
  // The weights and state are updated in their device copies; the changed rows of w come back
  // (written through: the host reads weights), the moments stay ahead until flush_state().
  const bool bf16 = u.w->dtype() == Dtype::bf16;
  // Each updated row comes back straight to its place in the host tensor. Addressed through raw(),
  // which does not mark the tensor written: a mark now would make resident_matrix() below upload
  // the whole of w again; changed(w, true) at the end records that the host has the device's rows.
  const size_t row_bytes = cols * dtype_bytes(u.w->dtype());
  auto* w_host = const_cast<std::byte*>(u.w->raw());
  std::vector<void*> w_out_rows(n);
  for (size_t j = 0; j < n; ++j) w_out_rows[j] = w_host + size_t{u.rows[j]} * row_bytes;
  std::vector<uint32_t> keys;
  if (bf16) {
    keys.resize(n);
    for (size_t j = 0; j < n; ++j) keys[j] = rounding_row_key(u.round_seed, u.row_base + u.rows[j]);
  }
  dev::OptimRows r;
  r.n = n;
  r.cols = cols;
  r.bf16 = bf16;
  r.rows = u.rows.data();
  r.w_out_rows = w_out_rows.data();
  r.keys = bf16 ? keys.data() : nullptr;
  r.col_base = static_cast<uint32_t>(u.col_base);
  r.grad = u.grad != nullptr ? u.grad->data() : nullptr;
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
  std::vector<float> step, c2;
  std::vector<uint8_t> frozen;
  if (adam && u.grad != nullptr) {
    step.resize(n);
    c2.resize(n);
    frozen.resize(n);
    for (size_t j = 0; j < n; ++j) {
      const uint32_t count = u.counts[j];
      FRUGAL_CHECK(count < u.correction1.size() && count < u.correction2.size(),
                   fmt::format("adam rows: update count {} beyond the bias corrections", count));
      step[j] = u.lr * u.correction1[count];
      frozen[j] = u.frozen(count) ? 1 : 0;
      c2[j] = u.correction2[frozen[j] != 0 ? u.freeze_after : count];
    }
    r.step = step.data();
    r.c2 = c2.data();
    r.frozen = frozen.data();
    if (u.freeze_after > 0) r.frozen_floor = u.frozen_floor();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  r.w = const_cast<void*>(resident_matrix(*u.w).p);
  r.m = const_cast<void*>(resident_matrix(*u.m).p);
  r.v = adam ? const_cast<void*>(resident_matrix(*u.v).p) : nullptr;
  if (adam)
    dev::adam_rows(context(), r);
  else if (op == Op::sgd_rows)
    dev::sgd_rows(context(), r);
  else
    dev::adagrad_rows(context(), r);
  mirror_->changed(*u.w, true);
  mirror_->changed(*u.m, false);
  if (adam) mirror_->changed(*u.v, false);
}

void CudaBackend::adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::adam_rows); }
void CudaBackend::sgd_rows(const RowUpdate& u) { optimizer_rows(u, Op::sgd_rows); }
void CudaBackend::adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::adagrad_rows); }

CudaBackend::Listed CudaBackend::listed(const Tensor& x, std::span<const uint32_t> rows) {
  context();
  Listed in;
  if (const void* d = mirror_->find(x)) {  // weights being hashed: their device copy, rows listed
    in.x = {d, true, x.dtype() == Dtype::bf16};
    in.rows = rows.empty() ? nullptr : rows.data();
    return in;
  }
  if (rows.empty() && x.dtype() == Dtype::f32) {
    in.x = {x.data(), false, false};
    return in;
  }
  in.gathered = gather_rows(x, rows);  // widened to f32 on the host
  in.x = {in.gathered.data(), false, false};
  return in;
}

void CudaBackend::simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                                uint32_t* codes) {
  FRUGAL_CHECK(spec.planes != nullptr && spec.planes->rows() == spec.tables * spec.k &&
                   spec.planes->cols() == x.cols(),
               fmt::format("SimHash: {} x {} planes for {} tables of {} bits over {} dimensions",
                           spec.planes == nullptr ? 0 : spec.planes->rows(),
                           spec.planes == nullptr ? 0 : spec.planes->cols(), spec.tables, spec.k, x.cols()));
  for (const uint32_t r : rows) FRUGAL_CHECK(r < x.rows(), fmt::format("LSH: row {} of a {}-row matrix", r, x.rows()));
  const size_t n = rows.empty() ? x.rows() : rows.size();
  std::lock_guard<std::mutex> lock(mutex_);
  const Listed in = listed(x, rows);
  dev::simhash(context(), spec.planes->data(), spec.tables, spec.k, in.x, in.rows, n, x.cols(), codes);
}

void CudaBackend::dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) {
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
  std::lock_guard<std::mutex> lock(mutex_);
  const Listed in = listed(x, rows);
  dev::dwta(context(), p, spec.coords.data(), in.x, in.rows, n, x.cols(), codes);
}

CudaBackend::DeviceBuckets& CudaBackend::device_buckets(const BucketTables& tables) {
  const size_t nt = tables.num_tables();
  size_t total = 0;
  for (size_t t = 0; t < nt; ++t) total += tables.ids[t].size();
  DeviceBuckets& d = buckets_[tables.owner];
  // The generation names the contents; the shape is checked too, so that tables of another shape
  // at a reused address are never read through an old copy.
  if (d.offsets != nullptr && d.generation == tables.generation && d.buckets == tables.buckets && d.tables == nt &&
      d.total == total)
    return d;
  dev::Context& ctx = context();
  dev::device_free(ctx, d.offsets);
  dev::device_free(ctx, d.ids);
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
  d.offsets = dev::device_alloc(ctx, offsets.size() * sizeof(uint32_t));
  d.ids = dev::device_alloc(ctx, ids.size() * sizeof(uint32_t));
  dev::upload(ctx, d.offsets, offsets.data(), offsets.size() * sizeof(uint32_t));
  dev::upload(ctx, d.ids, ids.data(), ids.size() * sizeof(uint32_t));
  d.max_entries = static_cast<uint32_t>(max_entries);
  d.generation = tables.generation;
  d.buckets = tables.buckets;
  d.tables = nt;
  d.total = total;
  return d;
}

void CudaBackend::bucket_union(const BucketTables& tables, const BucketQuery& q, ActiveSets& out) {
  q.validate(tables);
  const size_t nt = tables.num_tables();
  // Each sample's entry count (its output region on the device, and `scanned`), from the host's
  // offsets: a few look-ups per sample.
  std::vector<uint64_t> entries(q.samples, 0);
  for (size_t i = 0; i < q.samples; ++i)
    for (size_t t = 0; t < nt; ++t) {
      const uint32_t c = q.codes[i * nt + t];
      entries[i] += tables.offsets[t][c + 1] - tables.offsets[t][c];
    }
  if (q.scanned != nullptr) std::copy(entries.begin(), entries.end(), q.scanned);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.clear();
    DeviceBuckets& d = device_buckets(tables);
    if (dev::bucket_union(context(), static_cast<const uint32_t*>(d.offsets), static_cast<const uint32_t*>(d.ids),
                          tables.buckets, static_cast<uint32_t>(nt), d.max_entries, q.codes, q.samples,
                          q.label_offsets.data(), q.labels.data(), q.cap, entries.data(), out.offsets, out.ids))
      return;
  }
  // Buckets holding more entries per sample than a block's shared memory: the CPU backend's union
  // (the same result, parallel over samples on the host).
  Backend* cpu = find_backend("cpu");
  FRUGAL_CHECK(cpu != nullptr, "bucket_union: buckets too large for the device and no CPU backend registered");
  cpu->bucket_union(tables, q, out);
}

}  // namespace frugal::gpu
