#include "kernels/emulated_backend.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/op_profile.h"

namespace frugal::kernels {
namespace {

OpProfile& emulated_profile() {
  static OpProfile profile("emulated profile (FRUGAL_EMULATED_PROFILE)", "FRUGAL_EMULATED_PROFILE");
  return profile;
}

constexpr size_t kAlign = 64;

// Row accumulation's state, the CPU backend's inside one of this backend's own (so that a layer's
// workspace slot keeps it between steps: core/backend.h's row_workspace checks the owner).
class EmulatedRowWorkspace final : public RowWorkspace {
 public:
  EmulatedRowWorkspace(const Backend* owner, std::unique_ptr<RowWorkspace> cpu)
      : RowWorkspace(owner, cpu->num_rows()), cpu_(std::move(cpu)) {}
  RowWorkspace& cpu() { return *cpu_; }

 private:
  std::unique_ptr<RowWorkspace> cpu_;
};

void check_range(const Buffer& b, size_t offset, size_t bytes, const char* op) {
  check_buffer_range(b, offset, bytes, fmt::format("emulated device: {}", op));
}

template <class T>
uint64_t bytes_of(std::span<T> s) {
  return s.size() * sizeof(T);
}
template <class T>
uint64_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

}  // namespace

// One op's arguments as the CPU kernels see them. A tensor in the device's buffers is viewed as
// host memory (that is what the emulation's device memory is) at no cost; host memory the caller
// passed is staged: its bytes are counted up before the op (inputs) and down after it (outputs),
// as a device would have to copy them. finish() completes the op: an output whose view the kernel
// had to grow is copied into the device tensor (a device op writes its outputs in place).
class Staged {
 public:
  Staged(EmulatedBackend& be, const char* op) : be_(be), timer_(emulated_profile(), op) {}
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;

  const Tensor& in(const Tensor& t) {
    if (mine(t)) return alias(t);
    up(t.bytes());
    return t;
  }
  // Read and written by the op.
  Tensor& inout(Tensor& t) {
    if (mine(t)) return output(t);
    up(t.bytes());
    host_outputs_.push_back(&t);
    return t;
  }
  // Written by the op only (its shape may change).
  Tensor& out(Tensor& t) {
    if (mine(t)) return output(t);
    host_outputs_.push_back(&t);
    return t;
  }
  // Written by the op only, at rows x cols (sized on the device first).
  Tensor& out(Tensor& t, size_t rows, size_t cols) {
    t.resize(rows, cols);
    return out(t);
  }
  void up(uint64_t bytes) {
    if (bytes == 0) return;
    be_.count_up(bytes);
    timer_.stats.bytes_up += bytes;
  }
  void down(uint64_t bytes) {
    if (bytes == 0) return;
    be_.count_down(bytes);
    timer_.stats.bytes_down += bytes;
  }
  void finish() {
    for (auto& [t, view] : outputs_) {
      if (view->device_data() == t->device_data() && view->rows() == t->rows() && view->cols() == t->cols()) continue;
      t->resize(view->rows(), view->cols());
      if (view->bytes() > 0 && view->device_data() != t->device_data())
        std::memmove(t->device_data(), view->device_data(), view->bytes());
    }
    for (const Tensor* t : host_outputs_) down(t->bytes());
  }

 private:
  bool mine(const Tensor& t) const {
    if (t.owner() == &be_) return true;
    FRUGAL_CHECK(t.is_host(), fmt::format("emulated device: a tensor{} on {} given to an op of the emulated device",
                                          t.name().empty() ? "" : " '" + t.name() + "'", t.device().name()));
    return false;
  }
  Tensor& alias(const Tensor& t) {
    Tensor& a = views_.emplace_back(t.bytes() == 0 ? Tensor(t.rows(), t.cols(), t.dtype())
                                                   : Tensor::wrap(t.device_data(), t.rows(), t.cols(), t.dtype()));
    a.set_name(t.name());
    return a;
  }
  Tensor& output(Tensor& t) {
    Tensor& a = alias(t);
    outputs_.emplace_back(&t, &a);
    return a;
  }

  EmulatedBackend& be_;
  OpTimer timer_;
  std::deque<Tensor> views_;
  std::vector<std::pair<Tensor*, Tensor*>> outputs_;
  std::vector<const Tensor*> host_outputs_;
};

namespace {
// Registered when libfrugal is loaded (libfrugal links this object whole); made on first use.
bool register_probe() {
  register_backend_probe("emulated", []() -> std::unique_ptr<Backend> { return std::make_unique<EmulatedBackend>(); });
  return true;
}
[[maybe_unused]] const bool registered = register_probe();
}  // namespace

EmulatedBackend::EmulatedBackend()
    : cpu_(*find_backend("cpu")),
      memory_(std::make_shared<CachingAllocator>(
          [](size_t bytes) { return allocate_for_random_access(bytes, kAlign); },
          [](void* p) { free_for_random_access(p); })) {}
EmulatedBackend::~EmulatedBackend() = default;

void EmulatedBackend::count_up(uint64_t bytes) {
  up_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  up_calls_.fetch_add(1, std::memory_order_relaxed);
}

void EmulatedBackend::count_down(uint64_t bytes) {
  down_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  down_calls_.fetch_add(1, std::memory_order_relaxed);
}

Backend::Transfers EmulatedBackend::transfers() const {
  return {.to_device_bytes = up_bytes_.load(), .to_device_calls = up_calls_.load(), .to_host_bytes = down_bytes_.load(),
          .to_host_calls = down_calls_.load(), .on_device_bytes = device_bytes_.load()};
}

std::shared_ptr<Buffer> EmulatedBackend::alloc_buffer(size_t bytes) {
  // Host memory the host may not touch (its Device is not the host's), cached as a GPU's is.
  return make_cached_buffer(device(), memory_, bytes, this);
}

CachingAllocator::Stats EmulatedBackend::memory_stats() const { return memory_->stats(); }

// set / get appear in the profile's table next to the ops (the input batch, labels and loss
// cross there).
void EmulatedBackend::set(Buffer& dst, size_t offset, const void* src, size_t bytes) {
  check_range(dst, offset, bytes, "set");
  if (bytes == 0) return;
  OpTimer timer(emulated_profile(), "set");
  std::memcpy(dst.base() + offset, src, bytes);
  if (dst.is_host()) return;
  count_up(bytes);
  timer.stats.bytes_up = bytes;
}

void EmulatedBackend::get(const Buffer& src, size_t offset, void* dst, size_t bytes) {
  check_range(src, offset, bytes, "get");
  if (bytes == 0) return;
  OpTimer timer(emulated_profile(), "get");
  std::memcpy(dst, src.base() + offset, bytes);
  if (src.is_host()) return;
  count_down(bytes);
  timer.stats.bytes_down = bytes;
}

void EmulatedBackend::copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) {
  check_range(dst, dst_offset, bytes, "copy");
  check_range(src, src_offset, bytes, "copy");
  for (const Buffer* b : {static_cast<const Buffer*>(&dst), &src})
    FRUGAL_CHECK(b->is_host() || b->owner() == this,
                 fmt::format("emulated device: copy with a buffer on {}", b->device().name()));
  if (bytes == 0) return;
  std::memmove(dst.base() + dst_offset, src.base() + src_offset, bytes);
  if (dst.is_host() == src.is_host()) {
    if (!dst.is_host()) device_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  } else if (dst.is_host()) {
    count_down(bytes);
  } else {
    count_up(bytes);
  }
}

void EmulatedBackend::clear(Buffer& dst, size_t offset, size_t bytes) {
  check_range(dst, offset, bytes, "clear");
  if (bytes > 0) std::memset(dst.base() + offset, 0, bytes);
}

void EmulatedBackend::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                             bool accumulate) {
  Staged s(*this, "matmul");
  const Tensor &av = s.in(a), &bv = s.in(b);
  cpu_.matmul(av, trans_a, bv, trans_b, accumulate ? s.inout(c) : s.out(c), accumulate);
  s.finish();
}

void EmulatedBackend::bias_act_forward(Tensor& y, const Tensor& bias, Act act) {
  Staged s(*this, "bias_act_forward");
  cpu_.bias_act_forward(s.inout(y), s.in(bias), act);
  s.finish();
}

void EmulatedBackend::bias_act_backward(Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad) {
  Staged s(*this, "bias_act_backward");
  // y may be grad itself (the exact softmax passes its logits twice); it is read only for relu.
  Tensor& g = s.inout(grad);
  const Tensor& yv = &y == &grad ? g : act == Act::relu ? s.in(y) : y;
  cpu_.bias_act_backward(g, yv, act, s.out(bias_grad));
  s.finish();
}

// The batch's features as the CPU kernels see them (each tensor staged when it is host memory).
static SparseFeatures staged_features(Staged& s, const SparseFeatures& x) {
  SparseFeatures v;
  v.offsets = s.in(x.offsets);
  v.ids = s.in(x.ids);
  v.values = s.in(x.values);
  return v;
}

void EmulatedBackend::sparse_input_forward(const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act,
                                           Tensor& out) {
  Staged s(*this, "sparse_input_forward");
  const SparseFeatures xv = staged_features(s, x);
  cpu_.sparse_input_forward(xv, s.in(w), s.in(bias), act, s.out(out, x.size(), w.cols()));
  s.finish();
}

// A row gradient's list as a device keeps it: the rows found on the device (`found`, the CPU
// kernel's list in this device's memory) stay there as grad's device_rows_tensor, and the caller
// listed the same rows on the host (core/backend.h). The emulation can afford to check that
// contract: a list that differs would update other rows than the gradient's.
void EmulatedBackend::keep_device_rows(RowGrad& grad, const std::vector<uint32_t>& found, const char* op,
                                       const char* what) {
  // The caller could not list them (RowGrad::rows_on_device): they stay here, only their count
  // comes down (row_accumulate counts it). Otherwise the caller's list must be the one found.
  if (grad.rows_on_device)
    grad.rows.clear();
  else
    FRUGAL_CHECK(found == grad.rows,
                 fmt::format("emulated device: {} found {} distinct rows, the caller listed {} others (grad.rows must "
                             "hold the distinct {}, ascending)",
                             op, found.size(), grad.rows.size(), what));
  keep_on(grad.device_rows_tensor, *this);
  grad.device_rows_tensor.resize(1, found.size());
  if (!found.empty()) std::memcpy(grad.device_rows_tensor.device_data(), found.data(), bytes_of(found));
  grad.device_rows_of = grad.rows;
}

void EmulatedBackend::sparse_input_backward(RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre,
                                            RowGrad& grad) {
  Staged s(*this, "sparse_input_backward");
  const SparseFeatures xv = staged_features(s, x);
  RowGrad view;
  Tensor& values = s.out(grad.values);
  view.values = std::move(values);
  cpu_.sparse_input_backward(dynamic_cast<EmulatedRowWorkspace&>(ws).cpu(), xv, s.in(grad_pre), view);
  values = std::move(view.values);
  keep_device_rows(grad, view.rows, "sparse_input_backward", "feature ids of the batch");
  s.finish();
}

// The sets' tensors as the CPU kernels see them (each staged when it is host memory).
static ActiveTensors staged_active(Staged& s, const ActiveTensors& a) {
  ActiveTensors v;
  v.offsets = s.in(a.offsets);
  v.ids = s.in(a.ids);
  v.logit_offsets = s.in(a.logit_offsets);
  return v;
}

void EmulatedBackend::active_logits(const Tensor& h, const ActiveTensors& active, const Tensor& w, const Tensor& bias,
                                    Tensor& logits) {
  Staged s(*this, "active_logits");
  const ActiveTensors av = staged_active(s, active);
  cpu_.active_logits(s.in(h), av, s.in(w), s.in(bias), s.out(logits, 1, active.total()));
  s.finish();
}

void EmulatedBackend::active_backward_input(const ActiveTensors& active, const Tensor& dlogits, const Tensor& w,
                                            Tensor& grad_h) {
  Staged s(*this, "active_backward_input");
  const ActiveTensors av = staged_active(s, active);
  cpu_.active_backward_input(av, s.in(dlogits), s.in(w), s.out(grad_h, active.num_samples(), w.cols()));
  s.finish();
}

std::unique_ptr<RowWorkspace> EmulatedBackend::make_row_workspace(size_t num_rows) {
  return std::make_unique<EmulatedRowWorkspace>(this, cpu_.make_row_workspace(num_rows));
}

void EmulatedBackend::row_accumulate(RowWorkspace& ws, const ActiveTensors& entries, const Tensor& coefs,
                                     const Tensor& vecs, RowGrad& grad, RowGrad* bias_grad) {
  Staged s(*this, "row_accumulate");
  ActiveTensors ev;
  ev.offsets = s.in(entries.offsets);
  ev.ids = s.in(entries.ids);
  const Tensor& coef_view = s.in(coefs);
  // The gradients' values are written on the device, their row lists kept there.
  RowGrad g, b;
  Tensor& values = s.out(grad.values);
  g.values = std::move(values);
  Tensor* bias_values = nullptr;
  if (bias_grad != nullptr) {
    bias_values = &s.out(bias_grad->values);
    b.values = std::move(*bias_values);
  }
  cpu_.row_accumulate(dynamic_cast<EmulatedRowWorkspace&>(ws).cpu(), ev, coef_view, s.in(vecs), g,
                      bias_grad != nullptr ? &b : nullptr);
  values = std::move(g.values);
  keep_device_rows(grad, g.rows, "row_accumulate", "row ids of the entries");
  if (grad.rows_on_device) s.down(sizeof(uint32_t));  // how many rows: the gradient's shape
  if (bias_grad != nullptr) {
    *bias_values = std::move(b.values);
    bias_grad->rows = grad.rows;  // the same list, on the device alike
    bias_grad->rows_on_device = grad.rows_on_device;
    keep_device_rows(*bias_grad, b.rows, "row_accumulate", "row ids of the entries");
  }
  s.finish();
}

// The batch's tensors as the CPU kernels see them (each staged when it is host memory).
static XentTensors staged_batch(Staged& s, const XentTensors& batch) {
  return {.offsets = &s.in(*batch.offsets), .pos_offsets = &s.in(*batch.pos_offsets),
          .positions = batch.positions != nullptr ? &s.in(*batch.positions) : nullptr,
          .label_offsets = &s.in(*batch.label_offsets),
          .grad_scale = batch.grad_scale};
}

void EmulatedBackend::xent_max(const Tensor& z, const XentTensors& batch, Tensor& max) {
  Staged s(*this, "xent_max");
  const XentTensors b = staged_batch(s, batch);
  cpu_.xent_max(s.in(z), b, s.out(max, 1, batch.num_samples()));
  s.finish();
}

void EmulatedBackend::xent_sums(const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums) {
  Staged s(*this, "xent_sums");
  const XentTensors b = staged_batch(s, batch);
  cpu_.xent_sums(s.in(z), b, s.in(max), s.out(sums, 1, 2 * batch.num_samples()));
  s.finish();
}

void EmulatedBackend::xent_loss_grad(Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums,
                                     Tensor& losses) {
  Staged s(*this, "xent_loss_grad");
  const XentTensors b = staged_batch(s, batch);
  const Tensor &mv = s.in(max), &sv = s.in(sums);
  cpu_.xent_loss_grad(s.inout(z), b, mv, sv, s.out(losses, 1, batch.num_samples()));
  s.finish();
}

void EmulatedBackend::top_k(const TopKInput& in, size_t k, Tensor& labels, Tensor& scores) {
  Staged s(*this, "top_k");
  TopKInput v = in;
  for (const Tensor** t : {&v.scores, &v.offsets, &v.ids, &v.bias})
    if (*t != nullptr) *t = &s.in(**t);
  cpu_.top_k(v, k, s.out(labels, in.rows, k), s.out(scores, in.rows, k));
  s.finish();
}

void EmulatedBackend::optimizer_rows(const RowUpdate& u, Op op) {
  Staged s(*this, op_name(op).data());
  RowUpdate d = u;
  // The model's tensors: on the device, or (host tensors) only the listed rows staged up and back.
  const auto rows_moved = [&](const Tensor* t) {
    return t == nullptr || t->empty() ? 0 : u.num_rows() * t->cols() * dtype_bytes(t->dtype());
  };
  const auto state = [&](Tensor* t) -> Tensor* {
    if (t == nullptr || t->owner() != this) {
      s.up(rows_moved(t));
      s.down(rows_moved(t));
      return t;
    }
    return &s.inout(*t);
  };
  d.w = state(u.w);
  d.m = state(u.m);
  d.v = state(u.v);
  if (u.grad != nullptr) d.grad = &s.in(*u.grad);
  if (u.corrections != nullptr) d.corrections = &s.in(*u.corrections);  // the optimizer keeps it here
  uint64_t plans = 0;
  for (const CatchUpPlan* p : u.plans)
    if (p != nullptr) plans += sizeof(CatchUpPlan) + 4 * uint64_t{p->terms_count};
  s.up(sizeof(const CatchUpPlan*) * u.plans.size() + plans);
  // The row list: already here (the gradient's own, RowGrad::device_rows) or sent.
  std::vector<uint32_t> device_rows;
  if (u.row_ids != nullptr) {
    const Tensor& ids = s.in(*u.row_ids);
    FRUGAL_CHECK(u.row_ids->owner() == this, "emulated device: the optimizer's row list is another backend's");
    const std::span<const uint32_t> listed = ids.u32();
    device_rows.assign(listed.begin(), listed.end());
    FRUGAL_CHECK(u.rows_on_device_only || std::equal(device_rows.begin(), device_rows.end(), u.rows.begin(), u.rows.end()),
                 "emulated device: the optimizer's row list on the device differs from its host list");
    d.rows = device_rows;
    d.rows_on_device_only = false;  // the CPU kernels read the host view of the device's list
  } else {
    s.up(bytes_of(u.rows));
  }
  // Adam's update counts: raised on the device from its per-row counts, or sent. The emulation
  // checks that the device's counts are the host's (they are two copies of one state).
  std::vector<uint32_t> device_counts;
  if (u.row_counts != nullptr) {
    FRUGAL_CHECK(u.row_counts->owner() == this, "emulated device: the optimizer's update counts are another backend's");
    const std::span<uint32_t> per_row = s.inout(*u.row_counts).u32();
    device_counts.reserve(d.rows.size());
    for (const uint32_t r : d.rows) device_counts.push_back(++per_row[r]);
    FRUGAL_CHECK(u.rows_on_device_only || (device_counts.size() == u.counts.size() &&
                                           std::equal(device_counts.begin(), device_counts.end(), u.counts.begin())),
                 "emulated device: the update counts kept on the device differ from the optimizer's");
    d.counts = device_counts;
  } else {
    s.up(bytes_of(u.counts));
  }
  if (op == Op::adam_rows) {
    cpu_.adam_rows(d);
  } else if (op == Op::sgd_rows) {
    cpu_.sgd_rows(d);
  } else if (op == Op::rowwise_adagrad_rows) {
    cpu_.rowwise_adagrad_rows(d);
  } else if (op == Op::rowwise_adam_rows) {
    cpu_.rowwise_adam_rows(d);
  } else {
    cpu_.adagrad_rows(d);
  }
  s.finish();
}

void EmulatedBackend::adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::adam_rows); }
void EmulatedBackend::sgd_rows(const RowUpdate& u) { optimizer_rows(u, Op::sgd_rows); }
void EmulatedBackend::adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::adagrad_rows); }
void EmulatedBackend::rowwise_adagrad_rows(const RowUpdate& u) { optimizer_rows(u, Op::rowwise_adagrad_rows); }
void EmulatedBackend::rowwise_adam_rows(const RowUpdate& u) { optimizer_rows(u, Op::rowwise_adam_rows); }

void EmulatedBackend::simhash_codes(const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                                    Tensor& codes) {
  Staged s(*this, "simhash_codes");
  SimHashSpec d = spec;
  if (spec.planes != nullptr) d.planes = &s.in(*spec.planes);
  s.up(bytes_of(rows));
  const Tensor& xv = s.in(x);
  cpu_.simhash_codes(d, xv, rows, s.out(codes, rows.empty() ? x.rows() : rows.size(), spec.tables));
  s.finish();
}

void EmulatedBackend::dwta_codes(const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows,
                                 Tensor& codes) {
  Staged s(*this, "dwta_codes");
  const bool placed = spec.placed_coords != nullptr && spec.placed_coords->owner() == this;
  s.up((placed ? 0 : bytes_of(spec.coords)) + bytes_of(rows));
  const Tensor& xv = s.in(x);
  cpu_.dwta_codes(spec, xv, rows, s.out(codes, rows.empty() ? x.rows() : rows.size(), spec.tables));
  s.finish();
}

// An op that shapes active sets on the device (bucket_union, active_extend): run(view) gets out's
// tensors as the CPU kernels see them; the host learns the sets' total (8 bytes) to shape what follows.
template <class Run>
static void shaped_on_device(Staged& s, ActiveTensors& out, Run&& run) {
  Tensor& offsets = s.out(out.offsets);
  Tensor& ids = s.out(out.ids);
  Tensor& logit_offsets = s.out(out.logit_offsets);
  ActiveTensors view;
  view.offsets = std::move(offsets);
  view.ids = std::move(ids);
  view.logit_offsets = std::move(logit_offsets);
  run(view);
  offsets = std::move(view.offsets);
  ids = std::move(view.ids);
  logit_offsets = std::move(view.logit_offsets);
  s.down(sizeof(uint64_t));
  s.finish();
}

void EmulatedBackend::bucket_union(const BucketTables& tables, const BucketInput& q, ActiveTensors& out) {
  Staged s(*this, "bucket_union");
  q.validate(tables.num_tables());
  BucketInput d = q;
  d.codes = &s.in(*q.codes);
  d.label_offsets = &s.in(*q.label_offsets);
  d.labels = &s.in(*q.labels);
  if (q.scanned != nullptr) d.scanned = &s.out(*q.scanned, 1, q.samples);
  // Tables built on this device (bucket_build) are read where they are; host tables are copied
  // up once per generation (as the CUDA backend keeps them).
  std::optional<BucketSpans> built;
  if (tables.built()) {
    built.emplace(tables, s.in(*tables.built_offsets), s.in(*tables.built_ids));
  } else {
    std::lock_guard<std::mutex> lock(tables_mutex_);
    uint64_t& generation = table_generations_[tables.owner];
    if (generation != tables.generation) {
      generation = tables.generation;
      uint64_t bytes = 0;
      for (size_t t = 0; t < tables.num_tables(); ++t) bytes += bytes_of(tables.offsets[t]) + bytes_of(tables.ids[t]);
      s.up(bytes);
    }
  }
  shaped_on_device(s, out, [&](ActiveTensors& view) { cpu_.bucket_union(built ? built->tables : tables, d, view); });
}

double EmulatedBackend::sum_squares(const Tensor& x) {
  Staged s(*this, "sum_squares");
  const double sum = cpu_.sum_squares(s.in(x));
  s.down(sizeof sum);
  s.finish();
  return sum;
}

void EmulatedBackend::scale(Tensor& x, float factor) {
  Staged s(*this, "scale");
  cpu_.scale(s.inout(x), factor);
  s.finish();
}

void EmulatedBackend::ranking_add(const RankingTensors& in, RankingState& state) {
  Staged s(*this, "ranking_add");
  RankingTensors d = in;
  d.top = &s.in(*in.top);
  d.label_offsets = &s.in(*in.label_offsets);
  d.labels = &s.in(*in.labels);
  d.ks = &s.in(*in.ks);
  d.discounts = &s.in(*in.discounts);
  if (in.inverse != nullptr) d.inverse = &s.in(*in.inverse);
  // The state stays where it is (on the device: read and written there, nothing crosses).
  const auto where = [&](Tensor& t) {
    Tensor& a = s.inout(t);
    return Tensor::wrap(a.device_data(), a.rows(), a.cols(), a.dtype());
  };
  RankingState view{where(state.sums), where(state.covered), where(state.relevant), where(state.counts)};
  cpu_.ranking_add(d, view);
  s.finish();
}

void EmulatedBackend::bucket_build(const BucketBuild& b, Tensor& offsets, Tensor& ids) {
  Staged s(*this, "bucket_build");
  BucketBuild d = b;
  d.codes = &s.in(*b.codes);
  Tensor& o = s.out(offsets);
  Tensor& i = s.out(ids);
  cpu_.bucket_build(d, o, i);
  s.finish();
}

void EmulatedBackend::active_extend(const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out) {
  Staged s(*this, "active_extend");
  ActiveExtension d = e;
  for (const Tensor** t : {&d.threshold, &d.alias, &d.log_prob, &d.log_count})
    if (*t != nullptr) *t = &s.in(**t);
  const ActiveTensors iv = staged_active(s, in);
  shaped_on_device(s, out, [&](ActiveTensors& view) { cpu_.active_extend(d, iv, view); });
}

}  // namespace frugal::kernels
