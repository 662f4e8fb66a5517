// Backend: where layers and optimizers compute (ggml's backend interface, in spirit). A Backend is
// a name, the ops it supports, the ops themselves, synchronize() and thread control. Every compute
// step of the layers (layers/) and of the optimizers (core/optim/) is one op call on a Backend, per
// batch or per parameter, never per row or element: a backend is free to run an op however it
// likes (threads, SIMD, a GPU) as long as it matches the scalar reference of tests/kernels/.
//
// Backends register themselves (register_backend(), usually from a static object in their own
// folder: kernels/ registers "cpu"; a device backend registers a probe, register_backend_probe(),
// made when first asked for). There is no process-wide choice: a layer, an optimizer or a sampler
// computes on the backend it was placed on (Layer/Model/Optimizer::set_backend(); ranks of one
// group may differ), and one never placed computes on the host backend (host_backend(), "cpu").
// The run API (train/run/, --device) and apps/' other commands pick a device and place the model
// on it; the trainer places its optimizer where the model's output layer computes.
//
// Memory is owned where it is computed (core/buffer.h): a backend allocates buffers
// (alloc_buffer), a Tensor is a view of one, and an op reads and writes tensors in its backend's
// memory without copying between the host and a device. Only set / get / copy move bytes, in the
// few places where data enters or leaves a step (the input batch, the labels, the loss, the
// wire, checkpoints); transfers() counts them. Row lists are listed on the host where the host
// has the ids (a sparse batch's features: DistinctRows) while a device keeps its own copy for the
// optimizer (RowGrad::device_rows); rows whose ids the host never had (the LSH sampler's sets, made
// on the device by its ops) stay there alone (RowGrad::rows_on_device). What still takes host
// memory is a table build's hashing on a host backend and the catch-up plans of `--sparse-updates
// catchup`: a device backend stages those arguments and counts them as crossings
// (kernels/emulated_backend.h shows how many bytes each op moves).
//
// Every op is synchronous on the host backend. A device backend may return before the work is done
// when its outputs stay on the device; synchronize() waits for everything issued so far, and an op
// whose output is host memory (std::vector, a host Tensor) returns with it filled.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/act.h"
#include "core/backend_ops.h"
#include "core/active_sets.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/catch_up_plan.h"
#include "core/parameter.h"
#include "core/sparse_batch.h"
#include "core/tensor.h"

namespace frugal {

// Every op of the Backend interface (the parity harness runs each on every backend).
#define FRUGAL_BACKEND_OP_ENUM(name, result, params) name,
enum class Op : uint8_t { FRUGAL_BACKEND_OPS(FRUGAL_BACKEND_OP_ENUM) };
#undef FRUGAL_BACKEND_OP_ENUM
#define FRUGAL_BACKEND_OP_COUNT(name, result, params) +1
inline constexpr size_t kNumOps = 0 FRUGAL_BACKEND_OPS(FRUGAL_BACKEND_OP_COUNT);
#undef FRUGAL_BACKEND_OP_COUNT
// sum_squares' order: consecutive chunks of this many elements, each summed in order, the chunks'
// sums added in order (so a device that sums chunks in parallel gives the CPU's bits).
inline constexpr size_t kSquaresChunk = 4096;
std::string_view op_name(Op op);
const std::array<Op, kNumOps>& all_ops();

// The reusable state of row accumulation (per layer, made by the backend that uses it): kept
// between calls so that a step allocates nothing.
class RowWorkspace {
 public:
  RowWorkspace(const class Backend* owner, size_t num_rows) : owner_(owner), num_rows_(num_rows) {}
  virtual ~RowWorkspace() = default;
  RowWorkspace(const RowWorkspace&) = delete;
  RowWorkspace& operator=(const RowWorkspace&) = delete;
  const Backend* owner() const { return owner_; }
  size_t num_rows() const { return num_rows_; }

 private:
  const Backend* owner_;
  size_t num_rows_;
};

// What a row missed while it had no gradient: CatchUpPlan, core/optim/catch_up_plan.h (the
// optimizers make the plans; row_update applies them).

// One optimizer step (or catch-up) over a list of rows of one parameter. Row j of the list is row
// rows[j] of w, m, v (row j itself with all_rows): first its catch-up (when plans is not empty and
// plans[j] is not null), then, when grad is given, the step's update with gradient grad->row(j).
struct RowUpdate {
  Tensor* w = nullptr;
  Tensor* m = nullptr;  // Adam: first moment; SGD: momentum buffer; Adagrad: sum of squared gradients
  Tensor* v = nullptr;  // Adam: second moment; SGD: unused
  std::span<const uint32_t> rows;              // distinct rows
  // Device backends: the same list already in the backend's memory (RowGrad::device_rows), so it
  // is not sent again; null: rows is sent. Host backends read rows.
  const Tensor* row_ids = nullptr;
  // The rows are in row_ids alone (RowGrad::rows_on_device: the host never had them): rows and
  // counts are empty, and Adam's counts are row_counts' (a device backend's lazy update).
  bool rows_on_device_only = false;
  // Device backends, Adam with a gradient: every row's update count so far (u32, w->rows() entries,
  // in the backend's memory; the optimizer keeps it beside its host counts). The op raises each
  // listed row's entry by one and uses the result as that row's count, so no counts are sent
  // (counts still holds them, for host backends and checks). Null: counts is sent.
  Tensor* row_counts = nullptr;
  // Every row of w in order, rows left empty, and (Adam) counts holding one count for all of them:
  // a dense parameter's step sends no row list (a device would get 8 bytes a row every step: the
  // exact softmax's 100k rows). No catch-up plans with it.
  bool all_rows = false;
  const Tensor* grad = nullptr;                // num_rows() x cols, or null (catch-up only)
  std::span<const CatchUpPlan* const> plans;   // per row, or empty (no catch-up)
  float keep = 1.0f;                           // 1 - lr * weight_decay (exactly 1 without decay)
  // Adam: row j's step is lr * correction1(counts[j]), its second-moment correction
  // correction2(counts[j]): the bias corrections 1 / (1 - beta^t) by update count t, a T x 2 f32
  // tensor where the backend computes (row t = correction1(t), correction2(t)), which the optimizer
  // keeps there and appends to as the counts grow (a table that crossed every step would grow
  // with the training's length).
  std::span<const uint32_t> counts;
  const Tensor* corrections = nullptr;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;  // eps: Adam's or Adagrad's
  float momentum = 0;  // SGD
  // Adam: a row's second moment stops moving after its freeze_after-th update (0: never), as 1-bit
  // Adam freezes its variance; later updates divide by that v and its correction2(freeze_after),
  // with v raised where needed so that the corrected v * correction2(freeze_after) is at least
  // (1 - beta2) g^2 (one ordinary step's share of the update's own gradient): an entry whose v was ~0
  // at the freeze cannot take an unbounded step (at most ~sqrt(1 / (1 - beta2)) ordinary ones), while
  // a burst up to that many steps' gradient stays linear.
  uint32_t freeze_after = 0;
  // bf16 state (w, m, v share one dtype): the updated rows are stored with stochastic rounding
  // whose random bits hash round_seed (the optimizer's step, the parameter, update or catch-up) and
  // the element's position in the whole parameter (row_base + row, col_base + column), so a sliced
  // parameter rounds exactly as the unsliced one.
  uint64_t round_seed = 0;
  size_t row_base = 0, col_base = 0;
  // The shapes every backend relies on (weights, state, gradient, plans, counts, rows in range);
  // throws frugal::Error naming what does not match. second_moment: Adam (v and counts used);
  // row_wise: m (Adagrad) or v (Adam) is one f32 value per row (rowwise_adagrad_rows,
  // rowwise_adam_rows, whose m has the weights' shape or is empty).
  void validate(bool second_moment, bool row_wise = false) const;
  size_t num_rows() const {
    return all_rows ? w->rows() : rows_on_device_only && row_ids != nullptr ? row_ids->size() : rows.size();
  }
  bool frozen(uint32_t count) const { return freeze_after > 0 && count > freeze_after; }
  // The floor of a frozen v, per g^2: (1 - beta2) / correction2(freeze_after), given the table's
  // entries (host kernels: corrections->data(); a device kernel reads its own).
  float frozen_floor(const float* table) const { return (1.0f - beta2) / table[2 * size_t{freeze_after} + 1]; }
};

// Logits of a batch in CSR form for the softmax cross-entropy ops: sample i's logits are
// z[offsets[i] .. offsets[i+1]); its labels owned here are at positions (within its logits)
// positions[pos_offsets[i] .. pos_offsets[i+1]), or, when labels_first, they are its first
// pos_offsets[i+1] - pos_offsets[i] logits (the LSH sampler puts them there: no positions cross to
// a device); it has label_offsets[i+1] - label_offsets[i] labels in all (over every rank), each
// weighted 1/count in the loss (no labels: no loss).
struct XentBatch {
  std::span<const uint64_t> offsets;
  std::span<const uint64_t> pos_offsets;
  std::span<const uint32_t> positions;
  bool labels_first = false;
  // Sample i's p-th label position (p in pos_offsets[i] .. pos_offsets[i+1]).
  uint64_t position(size_t i, uint64_t p) const { return labels_first ? p - pos_offsets[i] : positions[p]; }
  std::span<const uint64_t> label_offsets;
  // dLoss/dz is multiplied by it (the trainer's 1 / global batch), so every gradient computed from
  // it comes out scaled with no pass of its own over the rows' gradients. The loss is not scaled.
  float grad_scale = 1.0f;
  size_t num_samples() const { return offsets.size() - 1; }
  // The offsets cover `logits` logits and positions and labels have one entry per sample.
  void validate(size_t logits) const;
};

// A sparse batch's features (CSR) as tensors in a backend's memory: what the sparse input ops take.
// Point i's features are ids/values[offsets[i] .. offsets[i+1]).
struct SparseFeatures {
  Tensor offsets{0, 0, Dtype::u64}, ids{0, 0, Dtype::u32}, values{0, 0, Dtype::f32};
  size_t size() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  // x's features where `backend` computes: on a host backend, views of x's own vectors (no copy: x
  // must outlive their use); on a device, one set each (the input batch entering the step).
  void assign(const SparseBatch& x, Backend& backend);
  // The host kernels' view (host tensors only; throws naming the tensor otherwise).
  SparseView host() const { return {offsets.u64(), ids.u32(), values.span()}; }
};

// XentBatch's arrays as tensors in a backend's memory (u64 offsets, u32 positions): what the
// softmax cross-entropy ops take. host() is the XentBatch over them when they are host tensors
// (a host backend's kernels); it throws naming the tensor otherwise.
struct XentTensors {
  const Tensor* offsets = nullptr;
  const Tensor* pos_offsets = nullptr;
  const Tensor* positions = nullptr;  // null: labels first (XentBatch::labels_first)
  const Tensor* label_offsets = nullptr;
  float grad_scale = 1.0f;
  size_t num_samples() const { return offsets->size() - 1; }
  XentBatch host() const;
};

// What ranking_add counts, where the backend computes, zero to start (RankingCounter,
// train/ranking_counter.h): sums (f64, ks x ranking::kSums of core/ranking_counts.h); covered (ks x
// words) and relevant (1 x words): u32 words of flags (label l is bit l % 32 of word l / 32), which
// labels were hit within each k / are true labels; counts (u64, ks + 1): how many flags of each are
// set (covered per k, then relevant). The flags' width (RankingShape::labels) is 32 x words.
struct RankingState {
  Tensor sums, covered, relevant, counts;
};
inline size_t ranking_flag_words(size_t labels) { return (labels + 31) / 32; }
// The sizes ranking_add works with (RankingTensors::validate checks every shape and dtype, and that
// the state fits, naming what does not).
struct RankingShape {
  size_t rows = 0, width = 0, num_ks = 0, max_k = 0, labels = 0;
};

// A batch for ranking_add: the top k of rows first_row .. first_row + top->rows() of a batch, and
// the batch's true labels, all where the backend computes. Point first_row + i's labels are
// labels[label_offsets[first_row + i] .. label_offsets[first_row + i + 1]) (u64 offsets, u32
// labels, any order, duplicates allowed); top (u32, rows x width) its predictions, best first
// (UINT32_MAX: none). ks (u64), discounts (f64, max k of them: core/ranking_metrics.h's
// ranking_discounts) and inverse (f64 per label, 1/p; null: no propensities; a label beyond it
// weighs `unseen`) are the metrics' settings.
struct RankingTensors {
  const Tensor* top = nullptr;
  const Tensor* label_offsets = nullptr;
  const Tensor* labels = nullptr;
  size_t first_row = 0;
  const Tensor* ks = nullptr;
  const Tensor* discounts = nullptr;
  const Tensor* inverse = nullptr;
  double unseen = 1.0;
  RankingShape validate(const RankingState& state) const;
};
// The order of top_k's results: a higher score first, then a lower label id.
inline bool top_k_before(const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// Rows of candidates for top_k: row i's candidates are scores[offsets[i] .. offsets[i+1]) or, when
// offsets is null, scores[i * width .. (i+1) * width). Candidate e is label ids[e] (+ label_base),
// or, when ids is null, its position in the row. With bias, a candidate's score is its score plus
// bias[its label] (a float addition, before label_base), so raw logits need no pass of their own.
// TopKRows is the host kernels' form (pointers into host memory); the op takes TopKInput.
struct TopKRows {
  size_t rows = 0;
  const float* scores = nullptr;
  const uint64_t* offsets = nullptr;
  size_t width = 0;
  const uint32_t* ids = nullptr;
  uint32_t label_base = 0;
  const float* bias = nullptr;
};

// The same candidates as tensors in the backend's memory: scores (f32), offsets (u64, rows + 1;
// null: rows of `width`), ids (u32; null: positions), bias (f32; null: none) whose entry for label
// 0 is bias_offset. host() is the TopKRows over them when they are host tensors.
struct TopKInput {
  size_t rows = 0;
  const Tensor* scores = nullptr;
  const Tensor* offsets = nullptr;
  size_t width = 0;
  const Tensor* ids = nullptr;
  uint32_t label_base = 0;
  const Tensor* bias = nullptr;
  size_t bias_offset = 0;
  TopKRows host() const;
};

// SimHash: `tables` x k Gaussian hyperplanes as rows of planes; bit b of table t's code is whether
// <planes[t * k + b], x> > 0, first plane the highest bit.
struct SimHashSpec {
  const Tensor* planes = nullptr;
  int k = 0;
  size_t tables = 0;
};

// DWTA: per table k bins of bin_size coordinates (coords, tables * k * bin_size ids < dim); a bin's
// code is the position of its largest positive value; an empty bin (no positive value) borrows the
// code of another bin chosen by mix32(seed ^ (bin * 0x9e3779b97f4a7c15) ^ attempt) % bins, for
// attempt = 1 .. 64 (0 when all fail). Table t's code is its bins' codes, bin_bits each, first bin
// highest; when k * bin_bits > max_bucket_bits it is folded to
// mix32(code * 0x9e3779b97f4a7c15 + t) & ((1 << bucket_bits) - 1). (layers/lsh/dwta.h)
struct DwtaSpec {
  std::span<const uint32_t> coords;
  // The same coordinates where a device backend computes (u32), kept there by the hash family so
  // that they are not sent with every batch; null: a device sends coords.
  const Tensor* placed_coords = nullptr;
  int k = 0, bin_size = 0, bin_bits = 0, bucket_bits = 0, max_bucket_bits = 0;
  size_t tables = 0;
  uint64_t seed = 0;
};

// LSH tables over a layer's neurons (layers/lsh/lsh_tables.h), for bucket_union: table t's bucket b
// holds ids[t][offsets[t][b] .. offsets[t][b + 1]). `generation` names the contents (a new number
// at every build or load, new_bucket_generation()), `owner` the tables object: a backend that keeps
// a copy of the tables (on its device) copies them again when the owner's generation changes.
// Tables a device built (bucket_build) are its tensors instead, and nothing is copied: offsets and
// ids (u32, tables x (buckets + 1) and tables x neurons) as bucket_build leaves them, offsets and
// ids (the spans) empty.
struct BucketTables {
  const void* owner = nullptr;
  uint64_t generation = 0;
  uint32_t buckets = 0;  // per table
  size_t neurons = 0;    // every id is below it
  std::span<const std::span<const uint32_t>> offsets, ids;
  const Tensor* built_offsets = nullptr;
  const Tensor* built_ids = nullptr;
  size_t capacity = 0;  // the most ids a bucket holds (built tables: bounds a sample's entries)
  bool built() const { return built_offsets != nullptr; }
  size_t num_tables() const { return built() ? built_offsets->rows() : offsets.size(); }
};

// Built tables as the host kernels read them: spans over `offsets` and `ids`, host tensors of the
// built tensors' shape (the tensors themselves where the host can read them, else host copies).
struct BucketSpans {
  std::vector<std::span<const uint32_t>> offsets, ids;
  BucketTables tables;
  BucketSpans(const BucketTables& built, const Tensor& offsets, const Tensor& ids);
};

// bucket_build's input: codes (u32, neurons x tables, as the hash ops leave them, each below
// buckets) and the buckets' capacity; seed picks what an overfull bucket keeps.
struct BucketBuild {
  const Tensor* codes = nullptr;
  uint32_t buckets = 0;
  size_t capacity = 0;
  uint64_t seed = 0;
};
uint64_t new_bucket_generation();

// One batch's look-up: sample i's code in table t is codes[i * tables + t]; its labels are
// labels[label_offsets[i] .. label_offsets[i + 1]) (distinct ids below the tables' neuron count);
// cap 0 means no cap.
// scanned (optional, one per sample) receives how many bucket entries each sample read.
// (The host kernels' form; the op takes BucketInput, tensors where the backend computes.)
struct BucketQuery {
  size_t samples = 0;
  const uint32_t* codes = nullptr;
  std::span<const uint64_t> label_offsets;
  std::span<const uint32_t> labels;
  size_t cap = 0;
  uint64_t* scanned = nullptr;
  // The shapes every backend relies on (one offsets and ids span per table, buckets + 1 offsets
  // each, one label range per sample, codes below the bucket count); throws frugal::Error naming
  // what does not match.
  void validate(const BucketTables& tables) const;
};

// BucketQuery's arrays as tensors in a backend's memory: codes (u32, samples x tables, as the
// hash ops leave them), label_offsets (u64, samples + 1), labels (u32), scanned (optional, u64,
// shaped 1 x samples by the op). host() is the BucketQuery over them when they are host tensors.
struct BucketInput {
  size_t samples = 0;
  const Tensor* codes = nullptr;
  const Tensor* label_offsets = nullptr;
  const Tensor* labels = nullptr;
  size_t cap = 0;
  Tensor* scanned = nullptr;
  // Shapes and dtypes (readable on any device); throws frugal::Error naming what does not match.
  void validate(size_t tables) const;
  BucketQuery host() const;
};

// What active_extend adds to each sample's active set (LshSampler, layers/lsh/lsh_sampler.h). Sample
// i's set (its labels, then its LSH neurons) is first topped up to min(min_active, neurons) with
// neurons drawn uniformly, rng.below(neurons) with rng = Rng(rng_state).split(i), skipping members,
// at most 8 * that many tries (whatever the cap: a cap limits the LSH neurons and the draws); then, with draws > 0, m = min(draws, room left under cap) negatives
// are drawn with rng = Rng(rng_state).split(0x4e47).split(i), each as j = rng.below(neurons) kept
// when rng.uniform() < threshold[j], else alias[j] (Vose's alias table); the distinct drawn labels
// that are not members follow in ascending order, each drawn c times with logit offset
// log_count[c] - log_count[m] - log_prob[j] (log(c / (m Q(j))), summed in double, stored as float;
// 0 without logq), the members' offsets 0. (core/rng.h is the generator: the same bits on every
// backend.)
struct ActiveExtension {
  uint64_t rng_state = 0;
  size_t neurons = 0, min_active = 0, cap = 0;  // cap 0: none
  size_t draws = 0;                             // 0: no negatives, and no logit offsets
  bool logq = true;
  // With draws > 0, where the backend computes: threshold (f32) / alias (u32) / log_prob (f64),
  // one entry per neuron; log_count (f64): draws + 1 entries, log(c) at c.
  const Tensor* threshold = nullptr;
  const Tensor* alias = nullptr;
  const Tensor* log_prob = nullptr;
  const Tensor* log_count = nullptr;
  // The shapes every backend relies on; throws frugal::Error naming what does not match.
  void validate() const;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;
  // The device the backend's tensors live on (inputs and outputs of its ops).
  virtual Device device() const = 0;
  virtual bool supports(Op op) const = 0;
  // Waits until every op issued so far has finished.
  virtual void synchronize() = 0;
  // Threads the backend's ops use on the host for the rest of the process; 0 = all cores.
  virtual void set_num_threads(int threads) = 0;
  virtual int num_threads() const = 0;
  // Bytes of model state (weights and optimizer state) this backend can still take where it keeps
  // them; nullopt: unknown. `--slice-weights auto` caps a rank's share by it. The default is host
  // memory (core/host_memory.h), where the CPU backend keeps them; a device backend that keeps
  // copies on its device (the CUDA one) answers the smaller of that and its device's room.
  virtual std::optional<uint64_t> state_memory_available() const;
  // --- memory (core/buffer.h) ----------------------------------------------------------------
  // A buffer of `bytes` (uninitialized) where this backend computes: host memory for the host
  // backend (alloc_host_buffer), device memory for a device. Tensor(rows, cols, dtype, backend)
  // allocates through it. bytes 0 gives an empty buffer that only fixes the place.
  virtual std::shared_ptr<Buffer> alloc_buffer(size_t bytes);
  // Byte copies between host memory and this backend's buffers (or host buffers), ordered after
  // every op issued before them. set returns when src may be reused; get returns with dst filled
  // (it waits for the ops before it); copy (buffer to buffer, this backend's or host ones) and
  // clear (zeroes) are ordered on the backend's stream and may return before they are done:
  // synchronize() waits. The host backend's are memcpy / memset.
  virtual void set(Buffer& dst, size_t offset, const void* src, size_t bytes);
  virtual void get(const Buffer& src, size_t offset, void* dst, size_t bytes);
  virtual void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes);
  virtual void clear(Buffer& dst, size_t offset, size_t bytes);
  // What crossed between the host and this backend's device so far (set, get, and the staging of
  // ops whose arguments are host memory); all zero on the host backend. Counters only grow.
  struct Transfers {
    uint64_t to_device_bytes = 0, to_device_calls = 0;
    uint64_t to_host_bytes = 0, to_host_calls = 0;
    uint64_t on_device_bytes = 0;  // copy() within the device
    uint64_t crossed_bytes() const { return to_device_bytes + to_host_bytes; }
  };
  virtual Transfers transfers() const { return {}; }

  // matmul with bf16 operands and f32 accumulation (CUDA: tensor cores; CPU: oneDNN's AVX512-BF16
  // kernel), as `--precision bf16` asks for dense products: the operands are rounded to bf16 (to
  // nearest, ties to even) and their products summed in f32. Returns whether the backend does so
  // from now on; one without such products keeps f32 and answers false to `on` (the CPU backend
  // without AVX512-BF16 or under `--bf16-dot off`: kernels/cpu_backend.h).
  virtual bool set_bf16_products(bool on) { return !on; }

  // --- row accumulation ----------------------------------------------------------------------
  // A workspace for row_accumulate / sparse_input_backward over a matrix of num_rows rows.
  virtual std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) = 0;
  // Every op (core/backend_ops.h: their contracts), each a pure virtual.
#define FRUGAL_BACKEND_PURE_OP(name, result, params) virtual result name params = 0;
  FRUGAL_BACKEND_OPS(FRUGAL_BACKEND_PURE_OP)
#undef FRUGAL_BACKEND_PURE_OP
};

// t := src's values (1 x n, dtype) where `backend` computes: on a host backend a view of src's
// memory (no copy: src must outlive the view's use and not change meanwhile), on a device one set.
// (A step's small host-made inputs: the batch's features, labels, active sets made on the host.)
void values_where(Tensor& t, const void* src, size_t n, Dtype dtype, Backend& backend);
template <class T>
void values_where(Tensor& t, const std::vector<T>& src, Dtype dtype, Backend& backend) {
  values_where(t, src.data(), src.size(), dtype, backend);
}

// matmul's M, N, K from its operands; throws frugal::Error naming the shapes when they do not fit.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
};
MatmulShape matmul_shape(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c);

// The registry. A backend registers once (its name must be new) and lives for the process.
Backend& register_backend(std::unique_ptr<Backend> backend);
// A backend made only when it is first asked for: find_backend(name), or backends() (which lists
// every backend, so it runs every probe). `make` runs once, and may return null (no device here),
// which leaves the name unregistered; callers asking meanwhile from other threads wait for it. A
// device backend registers this way so that a process that never asks for it never starts the
// device's driver: a CUDA context costs time at start, and a sanitizer or profiler that injects
// itself into the driver must see it initialized after itself, not from a static initializer.
void register_backend_probe(std::string name, std::function<std::unique_ptr<Backend>()> make);
// backends(), find_backend(name) and host_backend(): core/device.h, the public face of the registry.

// A row workspace made by `backend` for num_rows rows, made again when `slot` holds none or one of
// another backend or size.
RowWorkspace& row_workspace(Backend& backend, std::unique_ptr<RowWorkspace>& slot, size_t num_rows);

}  // namespace frugal
