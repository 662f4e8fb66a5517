#include "core/backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "core/check.h"
#include "core/host_memory.h"
#include "core/ranking_counts.h"

namespace frugal {
namespace {

struct Probe {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
  bool started = false, finished = false;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> backends;
  std::atomic<Backend*> host{nullptr};  // host_backend(), found once; read without the lock
  std::vector<Probe> probes;
  // Held while probes run (not `mutex`: a probe registers its backend, and may look others up).
  // Recursive, so that a probe asking for its own name gets null instead of a deadlock.
  std::recursive_mutex probing;
};

// Built on first use: backends register from static objects of other libraries.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::optional<uint64_t> Backend::state_memory_available() const { return host_memory_available(); }

namespace {
// The host backend's copies: both sides must be host memory.
void check_host(const Buffer& b, const char* op) {
  FRUGAL_CHECK(b.is_host(), fmt::format("Backend::{}: a buffer on {} given to a backend that computes on the host", op,
                                        b.device().name()));
}
void check_range(const Buffer& b, size_t offset, size_t bytes, const char* op) {
  check_buffer_range(b, offset, bytes, fmt::format("Backend::{}", op));
}
}  // namespace

std::shared_ptr<Buffer> Backend::alloc_buffer(size_t bytes) { return alloc_host_buffer(bytes); }

MatmulShape matmul_shape(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c) {
  const size_t m = trans_a ? a.cols() : a.rows(), k = trans_a ? a.rows() : a.cols();
  const size_t kb = trans_b ? b.cols() : b.rows(), n = trans_b ? b.rows() : b.cols();
  FRUGAL_CHECK(k == kb && c.rows() == m && c.cols() == n,
               fmt::format("matmul: op(A) is {}x{}, op(B) {}x{}, C {}x{}", m, k, kb, n, c.rows(), c.cols()));
  for (const Tensor* t : {&a, &b, &c})
    FRUGAL_CHECK(t->dtype() == Dtype::f32, fmt::format("matmul: a {} operand", dtype_name(t->dtype())));
  return {static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k)};
}

void Backend::set(Buffer& dst, size_t offset, const void* src, size_t bytes) {
  check_host(dst, "set");
  check_range(dst, offset, bytes, "set");
  if (bytes > 0) std::memcpy(dst.base() + offset, src, bytes);
}

void Backend::get(const Buffer& src, size_t offset, void* dst, size_t bytes) {
  check_host(src, "get");
  check_range(src, offset, bytes, "get");
  if (bytes > 0) std::memcpy(dst, src.base() + offset, bytes);
}

void Backend::copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) {
  check_host(dst, "copy");
  check_host(src, "copy");
  check_range(dst, dst_offset, bytes, "copy");
  check_range(src, src_offset, bytes, "copy");
  if (bytes > 0) std::memmove(dst.base() + dst_offset, src.base() + src_offset, bytes);
}

void Backend::clear(Buffer& dst, size_t offset, size_t bytes) {
  check_host(dst, "clear");
  check_range(dst, offset, bytes, "clear");
  if (bytes > 0) std::memset(dst.base() + offset, 0, bytes);
}

std::string_view op_name(Op op) {
  switch (op) {
#define FRUGAL_BACKEND_OP_NAME(name, result, params) \
  case Op::name:                                      \
    return #name;
    FRUGAL_BACKEND_OPS(FRUGAL_BACKEND_OP_NAME)
#undef FRUGAL_BACKEND_OP_NAME
  }
  return "unknown";
}

uint64_t new_bucket_generation() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

BucketSpans::BucketSpans(const BucketTables& built, const Tensor& o, const Tensor& i) : tables(built) {
  const size_t nt = o.rows(), stride = size_t{built.buckets} + 1;
  FRUGAL_CHECK(o.dtype() == Dtype::u32 && i.dtype() == Dtype::u32 && o.cols() == stride && i.rows() == nt &&
                   i.cols() == built.neurons,
               fmt::format("bucket tables: {}x{} offsets and {}x{} ids for {} buckets of {} neurons", o.rows(),
                           o.cols(), i.rows(), i.cols(), built.buckets, built.neurons));
  for (size_t t = 0; t < nt; ++t) {
    const std::span<const uint32_t> row = o.u32().subspan(t * stride, stride);
    FRUGAL_CHECK(row.back() <= built.neurons,
                 fmt::format("bucket tables: table {} ends at {} of {} neurons", t, row.back(), built.neurons));
    offsets.push_back(row);
    ids.push_back(i.u32().subspan(t * built.neurons, row.back()));
  }
  tables.offsets = offsets;
  tables.ids = ids;
  tables.built_offsets = nullptr;
  tables.built_ids = nullptr;
}

void BucketQuery::validate(const BucketTables& tables) const {
  FRUGAL_CHECK(!tables.built(), "bucket_union: built tables given to a host kernel (BucketSpans reads them)");
  const size_t nt = tables.num_tables();
  FRUGAL_CHECK(tables.ids.size() == nt, fmt::format("bucket_union: {} offset arrays for {} id arrays", nt,
                                                    tables.ids.size()));
  for (size_t t = 0; t < nt; ++t) {
    FRUGAL_CHECK(tables.offsets[t].size() == size_t{tables.buckets} + 1,
                 fmt::format("bucket_union: table {} has {} offsets for {} buckets", t, tables.offsets[t].size(),
                             tables.buckets));
    FRUGAL_CHECK(tables.offsets[t].back() == tables.ids[t].size(),
                 fmt::format("bucket_union: table {}'s offsets end at {}, its ids are {}", t,
                             tables.offsets[t].back(), tables.ids[t].size()));
  }
  FRUGAL_CHECK(label_offsets.size() == samples + 1 && label_offsets.back() == labels.size(),
               fmt::format("bucket_union: {} label offsets ending at {} for {} samples and {} labels",
                           label_offsets.size(), label_offsets.empty() ? 0 : label_offsets.back(), samples,
                           labels.size()));
  for (const uint32_t l : labels)
    FRUGAL_CHECK(l < tables.neurons,
                 fmt::format("bucket_union: label {} is not below the tables' {} neurons", l, tables.neurons));
  for (size_t e = 0; e < samples * nt; ++e)
    FRUGAL_CHECK(codes[e] < tables.buckets, fmt::format("bucket_union: sample {}'s code {} in table {} is not below "
                                                        "the {} buckets", e / nt, codes[e], e % nt, tables.buckets));
}

const std::array<Op, kNumOps>& all_ops() {
  static const std::array<Op, kNumOps> ops = [] {
    std::array<Op, kNumOps> a{};
    for (size_t i = 0; i < kNumOps; ++i) a[i] = static_cast<Op>(i);
    return a;
  }();
  return ops;
}

// Runs the probes not yet finished of that name (all: of every name), once each. A caller that
// finds one started by another thread waits on `probing` until it has finished.
void run_probes(Registry& r, std::string_view name, bool all) {
  const auto matches = [&](const Probe& p) { return all || p.name == name; };
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (std::none_of(r.probes.begin(), r.probes.end(), [&](const Probe& p) { return !p.finished && matches(p); }))
      return;
  }
  std::lock_guard<std::recursive_mutex> probing(r.probing);
  for (size_t i = 0;; ++i) {
    std::function<std::unique_ptr<Backend>()> make;
    std::string probe_name;
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      if (i >= r.probes.size()) break;
      Probe& p = r.probes[i];
      if (p.started || !matches(p)) continue;
      p.started = true;
      make = p.make;
      probe_name = p.name;
    }
    const auto finish = [&] {
      std::lock_guard<std::mutex> lock(r.mutex);
      r.probes[i].finished = true;  // never tried again: an error is reported once
    };
    try {
      std::unique_ptr<Backend> made = make();
      if (made != nullptr) {
        FRUGAL_CHECK(made->name() == probe_name, fmt::format("the probe for backend '{}' made a backend named '{}'",
                                                             probe_name, made->name()));
        register_backend(std::move(made));
      }
    } catch (...) {
      finish();
      throw;
    }
    finish();
  }
}

void register_backend_probe(std::string name, std::function<std::unique_ptr<Backend>()> make) {
  FRUGAL_CHECK(make != nullptr, "register_backend_probe: no function to make the backend");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& b : r.backends)
    FRUGAL_CHECK(b->name() != name, fmt::format("backend '{}' is already registered", name));
  for (const Probe& p : r.probes)
    FRUGAL_CHECK(p.name != name, fmt::format("backend '{}' already has a probe", name));
  r.probes.push_back({std::move(name), std::move(make)});
}

Backend& register_backend(std::unique_ptr<Backend> backend) {
  FRUGAL_CHECK(backend != nullptr, "register_backend: null backend");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& b : r.backends)
    FRUGAL_CHECK(b->name() != backend->name(), fmt::format("backend '{}' is already registered", backend->name()));
  r.backends.push_back(std::move(backend));
  return *r.backends.back();
}

std::vector<Backend*> backends() {
  Registry& r = registry();
  run_probes(r, {}, true);
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Backend*> out;
  for (const auto& b : r.backends) out.push_back(b.get());
  return out;
}

Backend* find_backend(std::string_view name) {
  Registry& r = registry();
  run_probes(r, name, false);
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& b : r.backends)
    if (b->name() == name) return b.get();
  return nullptr;
}

Backend& host_backend() {
  Registry& r = registry();
  if (Backend* b = r.host.load(std::memory_order_acquire)) return *b;
  bool none = false;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    none = r.backends.empty();
  }
  if (none) run_probes(r, {}, true);  // only probes registered: the first one made is the fallback
  std::lock_guard<std::mutex> lock(r.mutex);
  Backend* pick = nullptr;
  for (const auto& b : r.backends)
    if (pick == nullptr && b->name() == "cpu") pick = b.get();
  FRUGAL_CHECK(!r.backends.empty(),
               "no compute backend is registered (libfrugal registers \"cpu\"; a static link must keep "
               "kernels/cpu_backend.o, e.g. with link_whole)");
  if (pick == nullptr) pick = r.backends.front().get();
  Backend* expected = nullptr;
  r.host.compare_exchange_strong(expected, pick, std::memory_order_acq_rel);
  return *r.host.load(std::memory_order_acquire);
}

RowWorkspace& row_workspace(Backend& backend, std::unique_ptr<RowWorkspace>& slot, size_t num_rows) {
  if (slot == nullptr || slot->owner() != &backend || slot->num_rows() != num_rows)
    slot = backend.make_row_workspace(num_rows);
  return *slot;
}

void RowUpdate::validate(bool second_moment, bool row_wise) const {
  FRUGAL_CHECK(w != nullptr && m != nullptr && (!second_moment || v != nullptr),
               "optimizer rows: missing weights or state");
  const size_t n = w->rows(), cols = w->cols();
  if (row_wise) {
    const Tensor* per_row = second_moment ? v : m;
    FRUGAL_CHECK(per_row->rows() == n && per_row->cols() == 1 && per_row->dtype() == Dtype::f32,
                 fmt::format("optimizer rows: row-wise state is one f32 per row ({} x 1), not {} x {} {}", n,
                             per_row->rows(), per_row->cols(), dtype_name(per_row->dtype())));
    FRUGAL_CHECK(!second_moment || m->empty() ||
                     (m->rows() == n && m->cols() == cols && m->dtype() == w->dtype()),
                 "optimizer rows: row-wise Adam's first moment must have the weights' shape and precision, or be "
                 "empty");
    FRUGAL_CHECK(freeze_after == 0, "optimizer rows: row-wise Adam has no frozen second moment");
  } else {
    FRUGAL_CHECK(m->rows() == n && m->cols() == cols && (!second_moment || (v->rows() == n && v->cols() == cols)),
                 "optimizer rows: the state's shape differs from the weights'");
    FRUGAL_CHECK(m->dtype() == w->dtype() && (!second_moment || v->dtype() == w->dtype()),
                 "optimizer rows: the state's precision differs from the weights'");
  }
  FRUGAL_CHECK(!all_rows || (rows.empty() && plans.empty()),
               "optimizer rows: all_rows takes no row list and no catch-up plans");
  const size_t listed = num_rows();
  FRUGAL_CHECK(grad == nullptr || (grad->rows() == listed && (listed == 0 || grad->cols() == cols)),
               "optimizer rows: the gradient's shape does not match the row list");
  FRUGAL_CHECK(plans.empty() || plans.size() == rows.size(), "optimizer rows: one catch-up plan per row");
  FRUGAL_CHECK(!rows_on_device_only ||
                   (row_ids != nullptr && rows.empty() && counts.empty() && plans.empty() && !all_rows &&
                    (!second_moment || grad == nullptr || row_counts != nullptr)),
               "optimizer rows: rows on the device only take their list and (Adam) update counts there, no host "
               "list, counts or catch-up plans");
  FRUGAL_CHECK(!second_moment || grad == nullptr || rows_on_device_only ||
                   counts.size() == (all_rows ? 1 : rows.size()),
               all_rows ? "optimizer rows: all_rows takes one update count" : "optimizer rows: one update count per row");
  if (second_moment && grad != nullptr) {
    FRUGAL_CHECK(corrections != nullptr && corrections->dtype() == Dtype::f32 && corrections->cols() == 2,
                 "optimizer rows: Adam needs its bias corrections (a T x 2 f32 tensor)");
    const size_t t = corrections->rows();
    for (const uint32_t c : counts)
      FRUGAL_CHECK(c < t, fmt::format("optimizer rows: update count {} beyond the {} bias corrections", c, t));
    // (A frozen row's count is above freeze_after, so its correction2(freeze_after) is in the table.)
  }
  for (const uint32_t r : rows) FRUGAL_CHECK(r < n, fmt::format("optimizer rows: row {} of {}", r, n));
  FRUGAL_CHECK(row_ids == nullptr || (!all_rows && row_ids->dtype() == Dtype::u32 && row_ids->size() == listed),
               "optimizer rows: the backend's row list must be u32 with one id per listed row");
  FRUGAL_CHECK(row_counts == nullptr ||
                   (second_moment && grad != nullptr && !all_rows && row_counts->dtype() == Dtype::u32 &&
                    row_counts->size() == n),
               "optimizer rows: the backend's update counts must be u32, one per row of the weights, for an Adam "
               "step over listed rows");
}

void values_where(Tensor& t, const void* src, size_t n, Dtype dtype, Backend& backend) {
  if (backend.device().is_host()) {
    t = Tensor::wrap(const_cast<void*>(src), 1, n, dtype);
    return;
  }
  if (t.dtype() != dtype) t = Tensor(0, 0, dtype, backend);
  keep_on(t, backend);
  t.resize(1, n);
  copy_from_host(t, src);
}

void SparseFeatures::assign(const SparseBatch& x, Backend& backend) {
  // Host: views of x's vectors, which the host kernels read in place.
  values_where(offsets, x.feature_offsets, Dtype::u64, backend);
  values_where(ids, x.feature_ids, Dtype::u32, backend);
  values_where(values, x.feature_values, Dtype::f32, backend);
}

void ActiveTensors::assign(const ActiveSets& a, Backend& backend) {
  FRUGAL_CHECK(!a.offsets.empty() && a.offsets.back() == a.ids.size() &&
                   (a.logit_offsets.empty() || a.logit_offsets.size() == a.ids.size()),
               fmt::format("active sets: {} ids, offsets ending at {}, {} logit offsets", a.ids.size(),
                           a.offsets.empty() ? 0 : a.offsets.back(), a.logit_offsets.size()));
  values_where(offsets, a.offsets, Dtype::u64, backend);
  values_where(ids, a.ids, Dtype::u32, backend);
  values_where(logit_offsets, a.logit_offsets, Dtype::f32, backend);
}

ActiveView ActiveTensors::host() const {
  return {.offsets = offsets.u64(), .ids = ids.u32(),
          .logit_offsets = logit_offsets.empty() ? std::span<const float>() : logit_offsets.span()};
}

TopKRows TopKInput::host() const {
  FRUGAL_CHECK(scores != nullptr, "top_k: no scores");
  FRUGAL_CHECK(bias == nullptr || bias_offset <= bias->size(),
               fmt::format("top_k: bias from entry {} of {}", bias_offset, bias == nullptr ? 0 : bias->size()));
  return {.rows = rows, .scores = scores->data(), .offsets = offsets != nullptr ? offsets->u64().data() : nullptr,
          .width = width, .ids = ids != nullptr ? ids->u32().data() : nullptr, .label_base = label_base,
          .bias = bias != nullptr ? bias->data() + bias_offset : nullptr};
}

XentBatch XentTensors::host() const {
  for (const Tensor* t : {offsets, pos_offsets, label_offsets})
    FRUGAL_CHECK(t != nullptr, "softmax: a batch without its offsets, label positions or labels");
  return {.offsets = offsets->u64(), .pos_offsets = pos_offsets->u64(),
          .positions = positions != nullptr ? positions->u32() : std::span<const uint32_t>(),
          .labels_first = positions == nullptr, .label_offsets = label_offsets->u64(), .grad_scale = grad_scale};
}

RankingShape RankingTensors::validate(const RankingState& state) const {
  FRUGAL_CHECK(top != nullptr && label_offsets != nullptr && labels != nullptr && ks != nullptr && discounts != nullptr,
               "ranking_add: a batch without its top k, label offsets, labels, cut-offs or discounts");
  const auto typed = [](const Tensor& t, Dtype d, const char* what) {
    FRUGAL_CHECK(t.dtype() == d, fmt::format("ranking_add: the {} are {}, not {}", what, dtype_name(t.dtype()),
                                             dtype_name(d)));
  };
  typed(*top, Dtype::u32, "predictions");
  typed(*label_offsets, Dtype::u64, "label offsets");
  typed(*labels, Dtype::u32, "labels");
  typed(*ks, Dtype::u64, "cut-offs");
  typed(*discounts, Dtype::f64, "discounts");
  if (inverse != nullptr) typed(*inverse, Dtype::f64, "inverse propensities");
  const RankingShape shape{.rows = top->rows(), .width = top->cols(), .num_ks = ks->size(), .max_k = discounts->size(),
                           .labels = 32 * state.relevant.size()};
  FRUGAL_CHECK(shape.num_ks > 0 && shape.max_k > 0, "ranking_add: no cut-offs");
  FRUGAL_CHECK(label_offsets->size() >= first_row + shape.rows + 1,
               fmt::format("ranking_add: {} label offsets for rows {} .. {}", label_offsets->size(), first_row,
                           first_row + shape.rows));
  typed(state.sums, Dtype::f64, "sums");
  typed(state.covered, Dtype::u32, "covered flags");
  typed(state.relevant, Dtype::u32, "relevant flags");
  typed(state.counts, Dtype::u64, "flag counts");
  FRUGAL_CHECK(state.sums.size() == shape.num_ks * ranking::kSums &&
                   state.covered.size() == shape.num_ks * state.relevant.size() && state.counts.size() == shape.num_ks + 1,
               fmt::format("ranking_add: state of {} sums, {} covered and {} relevant flag words and {} counts for {} "
                           "cut-offs", state.sums.size(), state.covered.size(), state.relevant.size(),
                           state.counts.size(), shape.num_ks));
  return shape;
}

void BucketInput::validate(size_t tables) const {
  FRUGAL_CHECK(codes != nullptr && label_offsets != nullptr && labels != nullptr,
               "bucket_union: a query without its codes, label offsets or labels");
  FRUGAL_CHECK(codes->dtype() == Dtype::u32 && codes->size() == samples * tables,
               fmt::format("bucket_union: {} {} codes for {} samples of {} tables", codes->size(),
                           dtype_name(codes->dtype()), samples, tables));
  FRUGAL_CHECK(label_offsets->dtype() == Dtype::u64 && label_offsets->size() == samples + 1 &&
                   labels->dtype() == Dtype::u32,
               fmt::format("bucket_union: {} {} label offsets and {} labels for {} samples", label_offsets->size(),
                           dtype_name(label_offsets->dtype()), dtype_name(labels->dtype()), samples));
}

BucketQuery BucketInput::host() const {
  return {.samples = samples, .codes = codes->u32().data(), .label_offsets = label_offsets->u64(),
          .labels = labels->u32(), .cap = cap, .scanned = scanned != nullptr ? scanned->u64().data() : nullptr};
}

void ActiveExtension::validate() const {
  FRUGAL_CHECK(neurons > 0 && neurons <= UINT32_MAX,
               fmt::format("active_extend: {} neurons, expected 1..2^32-1", neurons));
  if (draws == 0) return;
  FRUGAL_CHECK(threshold != nullptr && alias != nullptr && log_prob != nullptr && log_count != nullptr,
               "active_extend: negatives without their alias table, probabilities or count logarithms");
  FRUGAL_CHECK(threshold->dtype() == Dtype::f32 && threshold->size() == neurons && alias->dtype() == Dtype::u32 &&
                   alias->size() == neurons && log_prob->dtype() == Dtype::f64 && log_prob->size() == neurons,
               fmt::format("active_extend: an alias table of {} thresholds, {} aliases and {} probabilities for {} "
                           "neurons",
                           threshold->size(), alias->size(), log_prob->size(), neurons));
  FRUGAL_CHECK(log_count->dtype() == Dtype::f64 && log_count->size() == draws + 1,
               fmt::format("active_extend: {} count logarithms for {} draws", log_count->size(), draws));
}

void XentBatch::validate(size_t logits) const {
  FRUGAL_CHECK(!offsets.empty() && offsets.back() == logits,
               fmt::format("softmax: the offsets cover {} logits, there are {}", offsets.empty() ? 0 : offsets.back(),
                           logits));
  FRUGAL_CHECK(pos_offsets.size() == offsets.size() && label_offsets.size() == offsets.size(),
               "softmax: positions or labels do not match the samples");
  FRUGAL_CHECK(labels_first || positions.size() == pos_offsets.back(),
               fmt::format("softmax: {} label positions, the offsets end at {}", positions.size(), pos_offsets.back()));
  if (labels_first)
    for (size_t i = 0; i + 1 < offsets.size(); ++i)
      FRUGAL_CHECK(pos_offsets[i + 1] - pos_offsets[i] <= offsets[i + 1] - offsets[i],
                   fmt::format("softmax: sample {} has {} labels first among {} logits", i,
                               pos_offsets[i + 1] - pos_offsets[i], offsets[i + 1] - offsets[i]));
}

}  // namespace frugal
