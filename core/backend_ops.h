// Every op of the Backend interface (core/backend.h), declared once: X(name, result, (parameters)),
// in the order of the Op enum. The Op enum, op_name, all_ops, Backend's pure virtuals and every
// backend's override declarations (the CPU, emulated and CUDA backends: FRUGAL_BACKEND_OVERRIDES) are
// made from this list, so that a new op is a line here, its implementation in each backend and its
// parity case (tests/kernels), not a dozen files kept in step by hand. The comment above each op
// is its contract.
#pragma once

#define FRUGAL_BACKEND_OPS(X) \
  /* --- dense ------------------------------------------------------------------------------------------- */ \
  /* C (M x N) = op(A) * op(B) (+ C when accumulate), row-major f32 tensors in this backend's memory; */ \
  /* op(A) is A (M x K) or, with trans_a, the transpose of A stored as K x M; likewise B (K x N, or N x */ \
  /* K with trans_b). C is shaped M x N by the caller (matmul_shape checks it). */ \
  X(matmul, void, (const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, \
      bool accumulate = false)) \
  /* y[i][c] = act(y[i][c] + bias[c]) (bias has y.cols() entries, whatever its shape). */ \
  X(bias_act_forward, void, (Tensor& y, const Tensor& bias, Act act)) \
  /* In place: grad (dLoss/dy in, dLoss/d(pre-activation) out) is zeroed where y <= 0 for relu; */ \
  /* bias_grad (already shaped, grad.cols() entries) = the column sums of the result, in row order. */ \
  X(bias_act_backward, void, (Tensor& grad, const Tensor& y, Act act, Tensor& bias_grad)) \
  /* --- sparse input layer ------------------------------------------------------------------------------ */ \
  /* out (B x H) = act(x (B x F, sparse) * w (F x H) + bias (H entries)); relu maps v to v > 0 ? v : 0. */ \
  X(sparse_input_forward, void, (const SparseFeatures& x, const Tensor& w, const Tensor& bias, Act act, \
      Tensor& out)) \
  /* grad = row gradients of w: row f gets sum over the batch of value(i, f) * grad_pre[i] */ \
  /* (row_accumulate with the batch's features as entries). A host backend lists grad.rows itself. A */ \
  /* device backend finds the rows on the device and keeps its list there (RowGrad::device_rows_tensor, */ \
  /* for the optimizer): grad.rows must already hold the batch's distinct feature ids, ascending, which */ \
  /* the caller lists from its host copy of the batch (DistinctRows, core/distinct_rows.h), so that no */ \
  /* row list comes down. */ \
  X(sparse_input_backward, void, (RowWorkspace& ws, const SparseFeatures& x, const Tensor& grad_pre, RowGrad& grad)) \
  /* --- active sets ------------------------------------------------------------------------------------- */ \
  /* logits[e] = <h[i], w[ids[e]]> + bias[ids[e]] (+ active.logit_offsets[e] when there are any) for */ \
  /* every entry e of sample i. logits (1 x entries, f32) is shaped by the op. The sets are tensors in */ \
  /* this backend's memory (ActiveTensors::assign); their ids are below w's rows (the layer checked them */ \
  /* on the host). */ \
  X(active_logits, void, (const Tensor& h, const ActiveTensors& active, const Tensor& w, const Tensor& bias, \
      Tensor& logits)) \
  /* grad_h[i] = sum over sample i's entries e (in order) of dlogits[e] * w[ids[e]]. */ \
  X(active_backward_input, void, (const ActiveTensors& active, const Tensor& dlogits, const Tensor& w, \
      Tensor& grad_h)) \
  /* Entries e of sample i (entries.offsets, CSR) say row entries.ids[e] (below the workspace's rows) */ \
  /* receives coefs[e] * vecs[i]: grad.rows = the distinct rows, sorted; grad.values[j] = the sum for */ \
  /* grad.rows[j] in sample order; bias_grad (when not null) the same rows with the sums of the */ \
  /* coefficients. coefs: one f32 per entry (a tensor of entries.total() elements, any shape). As */ \
  /* sparse_input_backward: a host backend lists grad.rows itself; a device backend expects them listed */ \
  /* by the caller (DistinctRows over the host's ids) and keeps its own list on the device */ \
  /* (RowGrad::device_rows_tensor, in grad and bias_grad), or, with grad.rows_on_device (sets the host */ \
  /* never had), keeps the list there alone: rows stays empty, only the count comes down. */ \
  /* entries.logit_offsets are not read. */ \
  X(row_accumulate, void, (RowWorkspace& ws, const ActiveTensors& entries, const Tensor& coefs, const Tensor& vecs, \
      RowGrad& grad, RowGrad* bias_grad)) \
  /* --- softmax cross-entropy over active sets (split for the group's normalizer all-reduce) ------------ */ \
  /* The logits z (f32, offsets.back() elements, any shape) and the outputs are tensors in this */ \
  /* backend's memory; each op shapes its outputs: max 1 x B, sums 1 x 2B (f32), losses 1 x B (f64). */ \
  /* max[i] = the largest of sample i's logits (-inf for none). */ \
  X(xent_max, void, (const Tensor& z, const XentTensors& batch, Tensor& max)) \
  /* sums[i] = sum of exp(z - max[i]) over sample i's logits, sums[B + i] = sum of its true labels' */ \
  /* logits (both summed in double, stored as float; B = batch.num_samples()). */ \
  X(xent_sums, void, (const Tensor& z, const XentTensors& batch, const Tensor& max, Tensor& sums)) \
  /* Given the group's max and sums, with w = 1/labels (float): losses[i] = log(sums[i]) + max[i] - w */ \
  /* sums[B + i] (in double), and z becomes dLoss/dz = exp(z - max[i]) * (1 / sums[i]), minus w at the */ \
  /* true labels' positions, times batch.grad_scale (when it is not 1). A sample without labels gets */ \
  /* loss 0 and gradient 0. */ \
  X(xent_loss_grad, void, (Tensor& z, const XentTensors& batch, const Tensor& max, const Tensor& sums, \
      Tensor& losses)) \
  /* --- reductions (scalars that leave the step) -------------------------------------------------------- */ \
  /* The sum of x's squares (f32 elements, summed in double in kSquaresChunk order), returned to the */ \
  /* host: 8 bytes down. */ \
  X(sum_squares, double, (const Tensor& x)) \
  /* x[i] *= factor (f32, in place). */ \
  X(scale, void, (Tensor& x, float factor)) \
  /* --- ranking ----------------------------------------------------------------------------------------- */ \
  /* For each row, the k best candidates (higher score, then lower label first) into labels and scores */ \
  /* (rows x k). A row with fewer than k candidates is completed with the lowest labels (from 0, + */ \
  /* label_base) that are not among its candidates, scored -inf. labels (u32) and scores (f32) are */ \
  /* shaped rows x k by the op. */ \
  X(top_k, void, (const TopKInput& in, size_t k, Tensor& labels, Tensor& scores)) \
  /* Adds the batch's points to state: each point's share (core/ranking_counts.h's program) added to */ \
  /* state.sums in point order (the host's RankingMetrics' bits), its true labels and hits flagged, */ \
  /* which must be below the flags' width (the CPU checks; a device, which cannot throw, leaves a label */ \
  /* beyond unflagged). Nothing comes down: the caller reads state.sums and state.counts once, at the */ \
  /* end. */ \
  X(ranking_add, void, (const RankingTensors& in, RankingState& state)) \
  /* --- optimizers -------------------------------------------------------------------------------------- */ \
  /* Adam (decoupled weight decay): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; w = keep w - lr */ \
  /* correction1(count) m / (sqrt(v correction2(count)) + eps), after the catch-up. */ \
  X(adam_rows, void, (const RowUpdate& u)) \
  /* SGD: m = momentum m + g; w = keep w - lr m, after the catch-up. */ \
  X(sgd_rows, void, (const RowUpdate& u)) \
  /* Adagrad: m = m + g^2; w = keep w - lr g / (sqrt(m) + eps), after the catch-up. */ \
  X(adagrad_rows, void, (const RowUpdate& u)) \
  /* Row-wise Adagrad (FBGEMM's exact row-wise Adagrad: one accumulator per row, m is rows x 1 f32 */ \
  /* whatever the weights' dtype): m[r] += rowwise_mean_square(g) (core/rowwise.h's order); then w = */ \
  /* keep w - (lr / (sqrt(m[r]) + eps)) g, after the catch-up (weight decay only, as Adagrad's). */ \
  X(rowwise_adagrad_rows, void, (const RowUpdate& u)) \
  /* Row-wise Adam (v is rows x 1 f32: the moving average of the row's mean square; m is per element in */ \
  /* the weights' dtype, or empty: no momentum). Row r's catch-up (Adam's plan with v[r] one value): S = */ \
  /* sum_s terms[2s] / (terms[2s + 1] sqrt(v[r]) + eps) in f32 in term order, w = decay w - S m (w = */ \
  /* decay w without m), m *= m_decay, v[r] *= v_decay. Its step: v[r] = b2 v[r] + (1 - b2) */ \
  /* rowwise_mean_square(g); step = lr c1(count) / (sqrt(v[r] c2(count)) + eps) and m = b1 m + (1 - b1) */ \
  /* g, w = keep w - step m; without m, step = lr / (sqrt(v[r] c2(count)) + eps) (m = g: no first-moment */ \
  /* correction) and w = keep w - step g. bf16 rows store w with stochastic rounding (the hash's high 16 */ \
  /* bits, as rowwise_adagrad_rows) and m to nearest. */ \
  X(rowwise_adam_rows, void, (const RowUpdate& u)) \
  /* --- LSH --------------------------------------------------------------------------------------------- */ \
  /* codes (u32, shaped n x tables by the op) row j, column t = table t's code of row rows[j] of x */ \
  /* (every row of x, in order, when rows is empty). The sampler keeps a batch's codes where the backend */ \
  /* computes; a table build reads them on the host (a host tensor: they come down). */ \
  X(simhash_codes, void, (const SimHashSpec& spec, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes)) \
  X(dwta_codes, void, (const DwtaSpec& spec, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes)) \
  /* out (its ids and offsets, shaped by the op where out's tensors live; no logit offsets) = per */ \
  /* sample, its labels, then every neuron of its buckets (one per table) that is not one of them, once */ \
  /* each, in the order a scan finds them (table by table, bucket order). When labels and neurons are */ \
  /* more than q.cap (> 0), only the cap - labels neurons found in the most tables (ties: the lower id) */ \
  /* are kept, in that order. q.scanned (when given): per sample, the bucket entries it read. The codes */ \
  /* must be below the tables' bucket count (the hash ops' are). */ \
  X(bucket_union, void, (const BucketTables& tables, const BucketInput& q, ActiveTensors& out)) \
  /* out = in's sets with ActiveExtension's additions (offsets, ids and, with draws > 0, logit offsets, */ \
  /* shaped by the op); in has no logit offsets. */ \
  X(active_extend, void, (const ActiveExtension& e, const ActiveTensors& in, ActiveTensors& out)) \
  /* LSH tables where the backend computes (a device's rebuild: nothing crosses): offsets (u32, tables x */ \
  /* (buckets + 1)) and ids (u32, tables x neurons), shaped by the op. Table t's bucket b holds */ \
  /* ids[t][offsets[t][b] .. offsets[t][b + 1]): the neurons whose code in t is b, ascending, or, when */ \
  /* more than capacity have it, capacity of them: the first capacity of a shuffle of them (for j < */ \
  /* capacity, swap j with j + rng.below(count - j), rng = Rng(seed).split(t).split(b)). A table's */ \
  /* offsets start at 0; its ids beyond offsets[t][buckets] are unspecified. */ \
  X(bucket_build, void, (const BucketBuild& b, Tensor& offsets, Tensor& ids))

// Declares every op as an override (in a backend's class body).
#define FRUGAL_BACKEND_OVERRIDE_OP(name, result, params) result name params override;
#define FRUGAL_BACKEND_OVERRIDES FRUGAL_BACKEND_OPS(FRUGAL_BACKEND_OVERRIDE_OP)
