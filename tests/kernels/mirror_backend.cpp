#include "tests/kernels/mirror_backend.h"

#include <cstring>

#include "core/check.h"

namespace frugal::testing {

void* MirrorBackend::HostMemory::allocate(const Tensor& like, size_t bytes) {
  auto t = std::make_unique<Tensor>(like.rows(), like.cols(), like.dtype());
  FRUGAL_CHECK(t->bytes() == bytes, "mirror backend: a copy of another size than its tensor");
  void* p = const_cast<std::byte*>(t->raw());
  tensors_.emplace(p, std::move(t));
  return p;
}

void MirrorBackend::HostMemory::release(void* device) noexcept { tensors_.erase(device); }

void MirrorBackend::HostMemory::upload(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
}

void MirrorBackend::HostMemory::download(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
}

Tensor& MirrorBackend::HostMemory::tensor(const void* device) { return *tensors_.at(device); }

MirrorBackend::MirrorBackend() : cpu_(*find_backend("cpu")), mirror_(std::make_unique<DeviceMirror>(memory_)) {}
MirrorBackend::~MirrorBackend() = default;

Tensor& MirrorBackend::copy_of(const Tensor& t) {
  void* d = mirror_->acquire(t);
  FRUGAL_CHECK(d != nullptr, "mirror backend: an empty model tensor");
  return memory_.tensor(d);
}

const Tensor& MirrorBackend::current(const Tensor& t) {
  const void* d = mirror_->find(t);
  return d != nullptr ? memory_.tensor(d) : t;
}

void MirrorBackend::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate) {
  // A model tensor (a dense layer's or an exact softmax's weights) is read from its device copy.
  cpu_.matmul(current(a), trans_a, current(b), trans_b, c, accumulate);
}

void MirrorBackend::bias_act_forward(Tensor& y, const Tensor& bias, Act act) {
  cpu_.bias_act_forward(y, bias.empty() ? bias : copy_of(bias), act);
}

void MirrorBackend::bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  cpu_.bias_act_backward(grad, y, act, bias_grad);
}

void MirrorBackend::sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act,
                                         Tensor& out) {
  cpu_.sparse_input_forward(x, w.empty() ? w : copy_of(w), bias.empty() ? bias : copy_of(bias), act, out);
}

void MirrorBackend::sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre,
                                          RowGrad& grad) {
  cpu_.sparse_input_backward(ws, x, grad_pre, grad);
}

void MirrorBackend::active_logits(const Tensor& h, const ActiveSets& active, const Tensor& w, const Tensor& bias,
                                  Tensor& logits) {
  cpu_.active_logits(h, active, w.empty() ? w : copy_of(w), bias.empty() ? bias : copy_of(bias), logits);
}

void MirrorBackend::active_backward_input(const ActiveSets& active, const Tensor& dlogits, const Tensor& w,
                                          Tensor& grad_h) {
  cpu_.active_backward_input(active, dlogits, w.empty() ? w : copy_of(w), grad_h);
}

// The workspace is the CPU backend's (row accumulation reads no model tensor).
std::unique_ptr<RowWorkspace> MirrorBackend::make_row_workspace(size_t num_rows) {
  return cpu_.make_row_workspace(num_rows);
}

void MirrorBackend::row_accumulate(RowWorkspace& ws, std::span<const uint64_t> offsets, const uint32_t* ids,
                                   const Tensor& coefs, const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  cpu_.row_accumulate(ws, offsets, ids, coefs, vecs, grad, bias_grad);
}

void MirrorBackend::xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) {
  cpu_.xent_max(z, batch, max);
}

void MirrorBackend::xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) {
  cpu_.xent_sums(z, batch, max, sums);
}

void MirrorBackend::xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                                   Tensor& losses) {
  cpu_.xent_loss_grad(z, batch, max, sums, losses);
}

void MirrorBackend::top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) {
  TopKInput on = in;
  // The bias (a model tensor) from its device copy when there is one.
  if (in.bias != nullptr) on.bias = &current(*in.bias);
  cpu_.top_k(on, k, labels, scores);
}

void MirrorBackend::optimizer_rows(const RowUpdate& u, Op op) {
  if (u.rows.empty() || u.w->cols() == 0) {
    // Nothing changes; the CPU op still checks the arguments.
    op == Op::adam_rows ? cpu_.adam_rows(u) : op == Op::sgd_rows ? cpu_.sgd_rows(u) : cpu_.adagrad_rows(u);
    return;
  }
  const bool second = u.v != nullptr && !u.v->empty();
  RowUpdate d = u;
  d.w = &copy_of(*u.w);
  d.m = &copy_of(*u.m);
  if (second) d.v = &copy_of(*u.v);
  if (op == Op::adam_rows)
    cpu_.adam_rows(d);
  else if (op == Op::sgd_rows)
    cpu_.sgd_rows(d);
  else
    cpu_.adagrad_rows(d);
  // Write-through of the changed weight rows; the moments stay ahead on the "device".
  const size_t row_bytes = u.w->cols() * dtype_bytes(u.w->dtype());
  for (const uint32_t r : u.rows) {
    void* host = u.w->dtype() == Dtype::f32 ? static_cast<void*>(u.w->row(r)) : static_cast<void*>(u.w->bf16_row(r));
    std::memcpy(host, d.w->raw() + r * row_bytes, row_bytes);
  }
  written_through_ += u.rows.size() * row_bytes;
  mirror_->changed(*u.w, true);
  mirror_->changed(*u.m, false);
  if (second) mirror_->changed(*u.v, false);
}

void MirrorBackend::adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::adam_rows); }
void MirrorBackend::sgd_rows(const RowUpdate& u) { optimizer_rows(u, Op::sgd_rows); }
void MirrorBackend::adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::adagrad_rows); }

void MirrorBackend::simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                                  uint32_t* codes) {
  cpu_.simhash_codes(spec, current(x), rows, codes);
}

void MirrorBackend::dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                               uint32_t* codes) {
  cpu_.dwta_codes(spec, current(x), rows, codes);
}

}  // namespace frugal::testing
