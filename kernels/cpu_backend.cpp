#include "kernels/cpu_backend.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/parallel_rows.h"
#include "kernels/bf16_dot.h"
#include "kernels/dense_ops.h"
#include "kernels/lsh_ops.h"
#include "kernels/matmul.h"
#include "kernels/optim_ops.h"
#include "kernels/ranking_ops.h"
#include "kernels/softmax_ops.h"
#include "kernels/sparse_ops.h"
#include "kernels/vector_ops.h"

namespace frugal::kernels {
namespace {

class CpuRowWorkspace : public RowWorkspace {
 public:
  CpuRowWorkspace(const Backend* owner, size_t num_rows) : RowWorkspace(owner, num_rows), accumulator(num_rows) {}
  RowAccumulator accumulator;
};

RowAccumulator& accumulator_of(const Backend* self, RowWorkspace& ws) {
  auto* cpu = dynamic_cast<CpuRowWorkspace*>(&ws);
  FRUGAL_CHECK(cpu != nullptr && ws.owner() == self, "cpu backend: the row workspace was made by another backend");
  return cpu->accumulator;
}

// Codes of bf16 rows (LSH tables over bf16 weights): the listed rows (every row when rows is
// empty) widened to f32 a block at a time, each block hashed by the f32 kernel (`hash`), so the
// codes are those of the widened weights and the scratch stays small at millions of labels.
template <class Hash>
void widened_blocks(const Tensor& x, std::span<const uint32_t> rows, size_t tables, uint32_t* codes, Hash&& hash) {
  constexpr size_t kBlock = 4096;
  const size_t n = rows.empty() ? x.rows() : rows.size();
  for (const uint32_t r : rows)
    FRUGAL_CHECK(r < x.rows(), fmt::format("LSH codes: row {} of a {}-row matrix", r, x.rows()));
  Tensor wide;
  for (size_t j0 = 0; j0 < n; j0 += kBlock) {
    const size_t len = std::min(kBlock, n - j0);
    wide.resize(len, x.cols());
    parallel_rows(len, [&](size_t j) {
      widen_bf16(x.bf16_row(rows.empty() ? j0 + j : rows[j0 + j]), wide.row(j), x.cols());
    }, 256);
    hash(wide, codes + j0 * tables);
  }
}

// Registered when libfrugal is loaded (libfrugal links this object whole).
[[maybe_unused]] const Backend& registered = register_backend(std::make_unique<CpuBackend>());

}  // namespace

bool CpuBackend::supports(Op) const { return true; }

void CpuBackend::set_num_threads(int threads) { kernels::set_num_threads(threads); }
int CpuBackend::num_threads() const { return kernels::num_threads(); }

bool CpuBackend::set_bf16_products(bool on) {
  bf16_products_ = on && bf16_dot_active();  // --bf16-dot off, or no AVX512-BF16: f32 products
  return bf16_products_ == on;
}

void CpuBackend::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, bool accumulate) {
  const MatmulShape s = matmul_shape(a, trans_a, b, trans_b, c);
  const auto product = bf16_products_ ? kernels::matmul_bf16 : kernels::matmul;
  product(a.data(), trans_a, b.data(), trans_b, c.data(), s.m, s.n, s.k, accumulate);
}

double CpuBackend::sum_squares(const Tensor& x) { return kernels::sum_squares(x); }
void CpuBackend::scale(Tensor& x, float factor) { kernels::scale(x, factor); }
void CpuBackend::ranking_add(const RankingTensors& in, RankingState& state) { kernels::ranking_add(in, state); }

void CpuBackend::bias_act_forward(Tensor& y, const Tensor& bias, Act act) { kernels::bias_act_forward(y, bias, act); }

void CpuBackend::bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  kernels::bias_act_backward(grad, y, act, bias_grad);
}

void CpuBackend::sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act,
                                      Tensor& out) {
  kernels::sparse_input_forward(x.host(), w, bias, act == Act::relu, out);
}

void CpuBackend::sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre,
                                       RowGrad& grad) {
  FRUGAL_CHECK(grad_pre.rows() == x.size(), fmt::format("sparse_input_backward: {} gradient rows for {} points",
                                                        grad_pre.rows(), x.size()));
  const SparseView v = x.host();
  accumulator_of(this, ws).accumulate(v.offsets, v.ids.data(), v.values.data(), grad_pre, grad, nullptr);
}

void CpuBackend::active_logits(const Tensor& h, const ActiveTensors& active, const Tensor& w, const Tensor& bias,
                               Tensor& logits) {
  logits.resize(1, active.total());
  kernels::active_logits(h, active.host(), w, bias, logits.span());
}

void CpuBackend::active_backward_input(const ActiveTensors& active, const Tensor& dlogits, const Tensor& w,
                                       Tensor& grad_h) {
  kernels::active_backward_input(active.host(), dlogits.span(), w, grad_h);
}

std::unique_ptr<RowWorkspace> CpuBackend::make_row_workspace(size_t num_rows) {
  return std::make_unique<CpuRowWorkspace>(this, num_rows);
}

void CpuBackend::row_accumulate(RowWorkspace& ws, const ActiveTensors& entries, const Tensor& coefs,
                                const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  const ActiveView e = entries.host();
  FRUGAL_CHECK(!e.offsets.empty() && e.num_samples() <= vecs.rows(),
               fmt::format("row_accumulate: {} samples, {} vectors", e.num_samples(), vecs.rows()));
  FRUGAL_CHECK(coefs.size() == e.offsets.back() && e.offsets.back() == e.total(),
               fmt::format("row_accumulate: {} coefficients for {} entries", coefs.size(), e.offsets.back()));
  accumulator_of(this, ws).accumulate(e.offsets, e.ids.data(), coefs.data(), vecs, grad, bias_grad);
}

void CpuBackend::xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) {
  max.resize(1, batch.num_samples());
  kernels::xent_max(z.span(), batch.host(), max.span());
}

void CpuBackend::xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) {
  sums.resize(1, 2 * batch.num_samples());
  kernels::xent_sums(z.span(), batch.host(), max.span(), sums.span());
}

void CpuBackend::xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                                Tensor& losses) {
  losses.resize(1, batch.num_samples());
  kernels::xent_loss_grad(z.span(), batch.host(), max.span(), sums.span(), losses.f64());
}

void CpuBackend::top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) {
  labels.resize(in.rows, k);
  scores.resize(in.rows, k);
  kernels::top_k(in.host(), k, labels.u32(), scores.span());
}

void CpuBackend::adam_rows(const RowUpdate& u) { kernels::adam_rows(u); }
void CpuBackend::sgd_rows(const RowUpdate& u) { kernels::sgd_rows(u); }
void CpuBackend::adagrad_rows(const RowUpdate& u) { kernels::adagrad_rows(u); }
void CpuBackend::rowwise_adagrad_rows(const RowUpdate& u) { kernels::rowwise_adagrad_rows(u); }
void CpuBackend::rowwise_adam_rows(const RowUpdate& u) { kernels::rowwise_adam_rows(u); }

namespace {
// codes shaped n x tables (u32, host memory: the CPU backend computes there).
uint32_t* shaped_codes(Tensor& codes, const Tensor& x, std::span<const uint32_t> rows, size_t tables) {
  FRUGAL_CHECK(codes.is_host() && codes.dtype() == Dtype::u32,
               fmt::format("LSH codes: the output is {} on {}, not u32 host memory", dtype_name(codes.dtype()),
                           codes.device().name()));
  codes.resize(rows.empty() ? x.rows() : rows.size(), tables);
  return codes.u32().data();
}
}  // namespace

void CpuBackend::simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                               Tensor& codes) {
  uint32_t* out = shaped_codes(codes, x, rows, spec.tables);
  if (x.dtype() == Dtype::bf16)
    return widened_blocks(x, rows, spec.tables, out, [&](const Tensor& wide, uint32_t* block) {
      kernels::simhash_codes(spec, wide, {}, block);
    });
  kernels::simhash_codes(spec, x, rows, out);
}

void CpuBackend::dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) {
  uint32_t* out = shaped_codes(codes, x, rows, spec.tables);
  if (x.dtype() == Dtype::bf16)
    return widened_blocks(x, rows, spec.tables, out, [&](const Tensor& wide, uint32_t* block) {
      kernels::dwta_codes(spec, wide, {}, block);
    });
  kernels::dwta_codes(spec, x, rows, out);
}

void CpuBackend::bucket_union(const BucketTables& tables, const BucketInput& q, ActiveTensors& out) {
  q.validate(tables.num_tables());
  if (q.scanned != nullptr) q.scanned->resize(1, q.samples);
  if (!tables.built()) return kernels::bucket_union(tables, q.host(), out);
  // Tables a backend built (host tensors when built here; a device's are read through host copies).
  Tensor o, i;
  const BucketSpans spans(tables, host_view(*tables.built_offsets, o), host_view(*tables.built_ids, i));
  kernels::bucket_union(spans.tables, q.host(), out);
}

void CpuBackend::bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids) {
  FRUGAL_CHECK(offsets.is_host() && ids.is_host() && b.codes != nullptr && b.codes->is_host(),
               "bucket_build: the CPU backend builds tables in host memory");
  kernels::bucket_build(b, offsets, ids);
}

void CpuBackend::active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out) {
  kernels::active_extend(e, in, out);
}

}  // namespace frugal::kernels
