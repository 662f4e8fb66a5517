#include "apps/plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/run/stage_split.h"
#include "core/check.h"

namespace frugal::plan {
namespace {

double messages(double bytes, size_t segment) {
  return bytes > 0 ? std::ceil(bytes / static_cast<double>(segment)) : 0.0;
}

}  // namespace

std::string_view to_string(Scheme s) {
  switch (s) {
    case Scheme::mp_sparse: return "mp-sparse";
    case Scheme::dct_dp: return "dct-dp";
    case Scheme::dp_dense: return "dp-dense";
    case Scheme::pipeline: return "pipeline";
  }
  return "?";
}

double ThreadScaling::speed(double cores) const {
  if (cores <= 1.0) return std::max(cores, 1e-9);
  return 1.0 / (serial_fraction + (1.0 - serial_fraction) / cores);
}

double ThreadScaling::cores_for_speed(double s) const {
  if (s <= 1.0) return s;
  // s = 1 / (f + (1 - f) / c)  =>  c = (1 - f) / (1 / s - f); beyond 1 / f no core count reaches it.
  const double den = 1.0 / s - serial_fraction;
  return den > 1e-12 ? (1.0 - serial_fraction) / den : 1e9;
}

double ThreadScaling::rank_cores(double host_cores, int ranks, int threads) const {
  FRUGAL_CHECK(host_cores > 0 && ranks > 0 && threads > 0,
               "ThreadScaling::rank_cores needs positive host cores, ranks and threads");
  if (ranks <= host_cores) return std::min<double>(threads, host_cores / ranks);
  return std::min<double>(threads, cores_for_speed(speed(host_cores) / ranks));
}

ThreadScaling ThreadScaling::fit(int t1, double s1, int t2, double s2) {
  // s(t) = s(1) * (f + (1 - f) / t) for a run's seconds s at t threads.
  FRUGAL_CHECK(t1 != t2 && t1 > 0 && t2 > 0 && s1 > 0 && s2 > 0,
               "ThreadScaling::fit needs two runs at different positive thread counts with positive times");
  // s1 / s2 = (f + (1 - f) / t1) / (f + (1 - f) / t2); with q = s1 / s2:
  // f (1 - 1/t1 - q + q/t2) = q/t2 - 1/t1.
  const double q = s1 / s2, a = 1.0 / t1, b = 1.0 / t2;
  const double den = 1.0 - a - q + q * b;
  const double f = std::abs(den) < 1e-12 ? 0.0 : (q * b - a) / den;
  return {.serial_fraction = std::clamp(f, 0.0, 1.0)};
}

WireCost all_gather_cost(double total, int p, const ModelOptions& o) {
  if (p <= 1 || total <= 0) return {};
  const double block = total / p, sent = (p - 1) * block;
  const double msgs = (p - 1) * messages(block, o.segment_bytes);
  const bool ring = total >= static_cast<double>(o.ring_threshold_bytes);
  return {.bytes = sent + msgs * static_cast<double>(o.frame_header_bytes), .rounds = ring ? p - 1.0 : 1.0};
}

WireCost all_reduce_cost(double bytes, int p, const ModelOptions& o) {
  if (p <= 1 || bytes <= 0) return {};
  // As comm/collectives.cpp: two ranks whose blocks fit one segment each exchange directly.
  const bool one_round = p == 2 && bytes <= 2.0 * static_cast<double>(o.segment_bytes);
  if (bytes >= static_cast<double>(o.ring_threshold_bytes) && !one_round) {
    const double block = bytes / p;
    const double msgs = 2.0 * (p - 1) * messages(block, o.segment_bytes);
    return {.bytes = 2.0 * (p - 1) * block + msgs * static_cast<double>(o.frame_header_bytes), .rounds = 2.0 * (p - 1)};
  }
  return {.bytes = (p - 1) * (bytes + static_cast<double>(o.frame_header_bytes)), .rounds = 1.0};
}

WireCost reduce_scatter_cost(double total, int p, const ModelOptions& o) {
  if (p <= 1 || total <= 0) return {};
  const double block = total / p;
  const bool ring = total >= static_cast<double>(o.ring_threshold_bytes);
  const double msgs = (p - 1) * messages(block, ring ? o.segment_bytes : static_cast<size_t>(-1));
  return {.bytes = (p - 1) * block + msgs * static_cast<double>(o.frame_header_bytes), .rounds = ring ? p - 1.0 : 1.0};
}

WireCost exchange_cost(double bytes, int p, const ModelOptions& o) {
  if (p <= 1) return {};
  return {.bytes = (p - 1) * (bytes + static_cast<double>(o.frame_header_bytes)), .rounds = 1.0};
}

double touched_rows_at(double rows, double touched, double calibrated, double points) {
  if (rows <= 0 || touched <= 0) return 0.0;
  if (touched >= rows) return rows;
  // 1 - f = (1 - q)^calibrated per row; at `points`: 1 - (1 - f)^(points / calibrated).
  const double untouched = 1.0 - touched / rows;
  return rows * (1.0 - std::pow(untouched, points / std::max(calibrated, 1.0)));
}

double index_bytes_per_entry(double dim, double entries) {
  if (entries <= 0) return 0.0;
  const double gap = std::max(1.0, dim / entries);
  return std::max(1.0, std::ceil(std::log2(gap + 1.0) / 7.0));  // 7 bits per varint byte
}

CostModel::CostModel(Calibration sparse, ThreadScaling scaling, ModelOptions options, CpuCosts cpu)
    : sparse_(std::move(sparse)), scaling_(scaling), options_(options), cpu_(cpu) {
  FRUGAL_CHECK(sparse_.batch > 0 && sparse_.threads > 0, "CostModel: the calibration needs its batch and threads");
}

double CostModel::touched_entries(int model, double points, bool without_input) const {
  double entries = 0;
  for (const ParameterShape& p : sparse_.parameters) {
    if (without_input && p.input_layer) continue;
    const double touched = touched_rows_at(static_cast<double>(p.rows), p.touched_rows_per_step,
                                           static_cast<double>(sparse_.batch), points);
    entries += touched * static_cast<double>(p.cols) / model;  // rows or columns sliced: 1/M of the entries
  }
  return entries;
}

double CostModel::compute_seconds(Scheme scheme, int data, int model, double cores, size_t batch) const {
  const double points = static_cast<double>(batch) / data;  // each replica's share of the global batch
  // Work measured at the calibration's threads, brought to one thread, then to `cores`.
  const double speed = scaling_.speed(cores);
  if (scheme == Scheme::dp_dense) {
    FRUGAL_CHECK(has_dense_, "CostModel: no dense calibration");
    const double one = (points * dense_.seconds_per_sample + dense_.seconds_per_step) * scaling_.speed(dense_.threads);
    return one / speed;
  }
  double work = points * (sparse_.replicated_seconds_per_sample + sparse_.sliced_seconds_per_sample / model) +
                sparse_.rebuild_seconds_per_step / model;
  // The optimizer moves the rows the global batch touched (after the replicas' exchange, every replica
  // moves their union), as many as the calibration's rows at its batch would predict.
  const double calibrated = touched_entries(1, static_cast<double>(sparse_.batch));
  if (calibrated > 0)
    work += sparse_.optimizer_seconds_per_step * touched_entries(model, static_cast<double>(batch)) / calibrated;
  work *= scaling_.speed(sparse_.threads);
  if (scheme == Scheme::dct_dp && data > 1) {
    // Probed at one thread: this replica's touched entries, and the others' sent entries it merges.
    const double own = touched_entries(model, points);
    const double kept = own * sparse_.dp_keep;
    work += own * cpu_.compress_seconds_per_entry + (data - 1) * kept * cpu_.merge_seconds_per_entry;
  }
  return work / speed;
}

WireCost CostModel::model_parallel_wire(int data, int model, size_t batch) const {
  return slice_wire(0, sparse_.boundaries.size(), sparse_.sliced_softmax, data, model, batch,
                    splits_forward(data, model, batch), false);
}

WireCost CostModel::slice_wire(size_t first, size_t end, bool normalizer, int data, int model, size_t batch,
                               bool split_input, bool forward_only) const {
  WireCost w;
  if (model <= 1) return w;
  const double b = static_cast<double>(batch) / data;
  const bool dct = sparse_.mp_keep < 1.0;
  for (size_t i = first; i < end && i < sparse_.boundaries.size(); ++i) {
    const size_t width = sparse_.boundaries[i];
    if (exact_model_exchange()) {
      if (i == 0 && split_input) {  // the input layer's output in two halves
        w += all_gather_cost(b / 2 * width * 4.0, model, options_);
        w += all_gather_cost(b / 2 * width * 4.0, model, options_);
      } else {
        w += all_gather_cost(b * width * 4.0, model, options_);  // activations, f32
      }
      if (!forward_only) w += reduce_scatter_cost(b * width * 4.0, model, options_);  // their gradients
      continue;
    }
    // DCT-MP: each sample's top K of the rank's slice as positions and values (and an i8 scale);
    // backward the values at the same positions. A narrow wire (--mp-wire-dtype bf16, f16, i8) at
    // --mp-keep 1 takes the same exchange with the whole slice, which travels without positions.
    // A position is its gap to the previous one in a byte, or an escape byte and the position (2
    // bytes, 4 past 65,536) for gaps of 255 and more: priced from the mean gap, slice / K.
    const double slice = static_cast<double>(width) / model;
    const double kept = dct ? std::ceil(sparse_.mp_keep * slice) : slice;
    const double position_bytes = slice / std::max(kept, 1.0) < 255.0 ? 1.0 : (slice > 65536.0 ? 5.0 : 3.0);
    const double positions = dct ? position_bytes * kept : 0.0;
    const double scale = sparse_.mp_value_bytes < 2.0 ? 2.0 : 0.0;
    w += exchange_cost(b * (positions + kept * sparse_.mp_value_bytes + scale), model, options_);
    if (!forward_only) w += exchange_cost(b * (kept * sparse_.mp_value_bytes + scale), model, options_);
  }
  if (normalizer) w += all_gather_cost(model * b * 3.0 * 4.0, model, options_);  // the softmax normalizer
  return w;
}

WireCost CostModel::replica_wire(Scheme scheme, int data, int model, size_t batch) const {
  WireCost w;
  if (data <= 1) return w;
  if (scheme == Scheme::dp_dense) {
    FRUGAL_CHECK(has_dense_, "CostModel: no dense calibration");
    for (const size_t floats : dense_.parameter_floats) w += all_reduce_cost(floats * 4.0, data, options_);
    return w;
  }
  const double calibrated = static_cast<double>(sparse_.batch), global = static_cast<double>(batch);
  const double mine = global / data;
  double row_list_bytes = 0, union_bytes = 0, message_bytes = 0;
  for (const ParameterShape& p : sparse_.parameters) {
    const double share = 1.0 / model;
    const double rows = p.sliced_axis == 0 ? p.rows * share : p.rows;
    const double cols = p.sliced_axis == 1 ? p.cols * share : p.cols;
    // Touched rows of the local slice: the same fraction as of the whole parameter.
    const double fraction_of = rows / std::max<double>(p.rows, 1);
    const double own = touched_rows_at(p.rows, p.touched_rows_per_step, calibrated, mine) * fraction_of;
    if (scheme == Scheme::mp_sparse) {
      const double all = touched_rows_at(p.rows, p.touched_rows_per_step, calibrated, global) * fraction_of;
      row_list_bytes += data * own * 4.0;
      union_bytes += all * cols * 4.0;
    } else {
      const double keep = p.input_layer ? sparse_.dp_keep_input : sparse_.dp_keep;
      const double per_row = std::clamp(std::ceil(keep * cols * (1.0 - 1e-6)), 1.0, std::max(cols, 1.0));
      const double entries = own * per_row;
      message_bytes += entries * (index_bytes_per_entry(rows * cols, entries) + sparse_.dp_value_bytes) + 8.0;
    }
  }
  if (scheme == Scheme::mp_sparse) {
    w += all_gather_cost(row_list_bytes, data, options_);  // every replica's row lists, one collective
    w += all_reduce_cost(union_bytes, data, options_);     // the union rows' sums, one collective
  } else {
    w += all_reduce_cost(data * 4.0, data, options_);  // message sizes
    w += exchange_cost(message_bytes, data, options_);  // the thresholded messages
  }
  return w;
}

double CostModel::overlapped_seconds(Scheme scheme, int data, int model, double cores, size_t batch,
                                     const Link& link) const {
  if (!options_.overlap || scheme == Scheme::dp_dense || model <= 1 || !exact_model_exchange() ||
      sparse_.boundaries.empty())
    return 0.0;
  const double to_cores = scaling_.speed(sparse_.threads) / scaling_.speed(cores);
  const double b = static_cast<double>(batch) / data, width = static_cast<double>(sparse_.boundaries.front());
  // Forward: the first half's all-gather travels while the input layer computes the second half.
  double forward = 0;
  if (splits_forward(data, model, batch)) {
    const double first_half = wire_seconds(all_gather_cost(b / 2 * width * 4.0, model, options_), link);
    forward = std::min(first_half, b / 2 * sparse_.input_forward_seconds_per_sample / model * to_cores);
  }
  if (scheme != Scheme::mp_sparse || data > 1) return forward;
  // Backward (no replicas): the input boundary's reduce-scatter travels while the optimizer moves
  // the parameters above the input, its share of the touched entries.
  const double exposed = wire_seconds(reduce_scatter_cost(b * width * 4.0, model, options_), link);
  const double calibrated = touched_entries(1, static_cast<double>(sparse_.batch));
  const double above = touched_entries(model, b, true);
  const double optimizer = calibrated > 0 ? sparse_.optimizer_seconds_per_step * above / calibrated * to_cores : 0.0;
  return forward + std::min(exposed, optimizer);
}

bool CostModel::exact_model_exchange() const { return sparse_.mp_keep >= 1.0 && sparse_.mp_value_bytes == 4.0; }

bool CostModel::splits_forward(int data, int model, size_t batch) const {
  // As the trainer: only the exact exchange splits.
  if (!options_.overlap || model <= 1 || !exact_model_exchange() || sparse_.boundaries.empty() ||
      options_.forward_split == train::ForwardSplit::never)
    return false;
  if (options_.forward_split == train::ForwardSplit::always) return true;
  const double half = static_cast<double>(batch) / data / 2;
  return train::forward_split_pays(half * sparse_.input_multiply_adds_per_sample / model);
}

double CostModel::wire_seconds(const WireCost& w, const Link& link) const {
  FRUGAL_CHECK(link.bytes_per_s > 0, "CostModel: the link rate must be positive");
  return w.bytes / link.bytes_per_s + w.rounds * (link.latency_s + options_.message_overhead_s);
}

Prediction CostModel::predict(Scheme scheme, int data, int model, const Cluster& cluster, size_t batch) const {
  FRUGAL_CHECK(data >= 1 && model >= 1 && data * model == cluster.nodes,
               fmt::format("CostModel: grid {}x{} does not cover {} nodes", data, model, cluster.nodes));
  FRUGAL_CHECK(scheme != Scheme::dp_dense || model == 1, "CostModel: the dense baseline has no model slices");
  if (batch == 0) batch = scheme == Scheme::dp_dense && has_dense_ ? dense_.batch : sparse_.batch;
  Prediction p;
  p.scheme = scheme;
  p.data = data;
  p.model = model;
  p.compute_seconds_per_step = compute_seconds(scheme, data, model, cluster.cores, batch);
  WireCost w = scheme == Scheme::dp_dense ? WireCost{} : model_parallel_wire(data, model, batch);
  w += replica_wire(scheme, data, model, batch);
  p.bytes_per_step_per_rank = w.bytes;
  // The collectives' copies and reductions run on the rank's cores, between the link's bytes.
  p.compute_seconds_per_step += w.bytes * cpu_.collective_seconds_per_byte / scaling_.speed(cluster.cores);
  p.wire_seconds_per_step = wire_seconds(w, cluster.link);
  p.overlapped_seconds_per_step = overlapped_seconds(scheme, data, model, cluster.cores, batch, cluster.link);
  const double step = p.compute_seconds_per_step + p.wire_seconds_per_step - p.overlapped_seconds_per_step;
  p.samples_per_s = step > 0 ? static_cast<double>(batch) / step : 0.0;
  p.slice_weights.assign(static_cast<size_t>(model), 1.0 / model);  // nodes alike: equal slices
  return p;
}

std::pair<std::vector<double>, std::vector<double>> CostModel::layer_seconds_at(double rows) const {
  std::vector<double> all = sparse_.layer_seconds_per_sample, forward = sparse_.layer_forward_seconds_per_sample;
  const size_t n = all.size();
  if (sparse_.small_batch == 0 || sparse_.small_batch >= sparse_.batch ||
      sparse_.small_layer_seconds_per_sample.size() != n || sparse_.small_layer_forward_seconds_per_sample.size() != n)
    return {all, forward};
  // t(r) = a + b / r through (big, t_big) and (small, t_small); never below the big batch's a.
  const double big = static_cast<double>(sparse_.batch), small = static_cast<double>(sparse_.small_batch);
  const auto at = [&](double t_big, double t_small) {
    const double b = (t_small - t_big) / (1.0 / small - 1.0 / big);
    const double a = t_big - b / big;
    return std::max(0.0, a + b / std::max(rows, 1.0));
  };
  for (size_t l = 0; l < n; ++l) {
    all[l] = at(all[l], sparse_.small_layer_seconds_per_sample[l]);
    forward[l] = at(forward[l], sparse_.small_layer_forward_seconds_per_sample[l]);
  }
  return {all, forward};
}

Prediction CostModel::predict_pipeline(int data, int model, int stages, size_t micro, std::vector<size_t> split,
                                       const Cluster& cluster, size_t batch) const {
  const size_t layers = sparse_.layer_seconds_per_sample.size();
  FRUGAL_CHECK(layers >= 2, "CostModel: the calibration has no per-layer times (a run from before pipelines)");
  FRUGAL_CHECK(data >= 1 && model >= 1 && stages >= 1 && data * model * stages == cluster.nodes,
               fmt::format("CostModel: pipeline {}x{}x{} does not cover {} nodes", data, model, stages, cluster.nodes));
  if (batch == 0) batch = sparse_.batch;
  const double points = static_cast<double>(batch) / data;
  if (micro == 0) micro = run::default_micro_batches(static_cast<size_t>(stages), static_cast<size_t>(points));
  // Work measured at the calibration's threads, at `cores`.
  const double to_cores = scaling_.speed(sparse_.threads) / scaling_.speed(cluster.cores);
  const double mb = points / static_cast<double>(micro);
  const auto [layer_seconds, forward_seconds] = layer_seconds_at(mb);
  split = run::split_stages(layer_seconds, static_cast<size_t>(stages), split);
  const double calibrated = touched_entries(1, static_cast<double>(sparse_.batch));
  Prediction p;
  p.scheme = Scheme::pipeline;
  p.data = data;
  p.model = model;
  p.stages = stages;
  p.micro_batches = micro;
  p.stage_split = split;
  double sum_stage = 0, worst_stage = 0, worst_step = 0, sum_link = 0, worst_link = 0, worst_bytes = 0;
  double stage_cpu = 0;  // every rank's compute for one micro-batch, summed
  WireCost replicas_worst;
  for (size_t s = 0, first = 0; s < split.size(); first += split[s], ++s) {
    const size_t end = first + split[s];
    const bool last = end == layers;
    double per_sample = sparse_.stage_seconds_per_sample;
    for (size_t l = first; l < end; ++l)
      per_sample += layer_seconds[l] + (last ? 0.0 : forward_seconds[l]);
    // Sliced over M ranks (--grid DxMxS): each computes 1/M of the stage's layers, and the stage's
    // own boundaries (and the softmax normalizer, last) cross its group once per micro-batch.
    WireCost inside = slice_wire(first, end - (last ? 1 : 0), last && sparse_.sliced_softmax, 1, model,
                                 static_cast<size_t>(std::llround(mb)), false, false);
    // A stage before the last recomputes its forward passes: their all-gathers go again.
    if (!last) inside += slice_wire(first, end, false, 1, model, static_cast<size_t>(std::llround(mb)), false, true);
    const double stage = mb * per_sample * to_cores / model + wire_seconds(inside, cluster.link) +
                         inside.bytes * cpu_.collective_seconds_per_byte / scaling_.speed(cluster.cores);
    stage_cpu += mb * per_sample * to_cores;  // all M slices' compute
    // Per step: the optimizer over the stage's rows the global batch touched, the tables' rebuilds.
    double entries = 0;
    std::vector<ParameterShape> mine;
    for (const ParameterShape& q : sparse_.parameters)
      if (q.layer >= first && q.layer < end) {
        entries += touched_rows_at(static_cast<double>(q.rows), q.touched_rows_per_step,
                                   static_cast<double>(sparse_.batch), static_cast<double>(batch)) *
                   static_cast<double>(q.cols);
        mine.push_back(q);
      }
    double step = calibrated > 0 ? sparse_.optimizer_seconds_per_step * entries / calibrated * to_cores / model : 0.0;
    if (last) step += sparse_.rebuild_seconds_per_step * to_cores / model;
    // Replicas of the pipeline: this stage's touched rows, summed as replica_wire prices them.
    WireCost exchange;
    if (data > 1) {
      double row_list_bytes = 0, union_bytes = 0;
      for (const ParameterShape& q : mine) {
        // A slice's share of the rows (or columns) of a parameter sliced over the stage's M ranks.
        const double share = q.sliced_axis >= 0 ? 1.0 / model : 1.0;
        row_list_bytes += data * touched_rows_at(q.rows, q.touched_rows_per_step, sparse_.batch, points) * 4.0 *
                          (q.sliced_axis == 0 ? share : 1.0);
        union_bytes += touched_rows_at(q.rows, q.touched_rows_per_step, sparse_.batch, batch) * q.cols * 4.0 * share;
      }
      exchange += all_gather_cost(row_list_bytes, data, options_);
      exchange += all_reduce_cost(union_bytes, data, options_);
    }
    const double exchange_seconds = wire_seconds(exchange, cluster.link) +
                                    exchange.bytes * cpu_.collective_seconds_per_byte / scaling_.speed(cluster.cores);
    if (exchange.bytes > replicas_worst.bytes) replicas_worst = exchange;
    sum_stage += stage;
    worst_stage = std::max(worst_stage, stage);
    worst_step = std::max(worst_step, step + exchange_seconds);
    double bytes = exchange.bytes + inside.bytes * static_cast<double>(micro);
    if (!last) {
      // The boundary after this stage: the activations forward, their gradients back (DCT-MP's top-k).
      const double width = static_cast<double>(sparse_.boundaries[end - 1]);
      const double kept = sparse_.mp_keep < 1.0 ? std::ceil(sparse_.mp_keep * width) : width;
      const bool compressed = kept < width || sparse_.mp_value_bytes != 4.0;
      const double scale = sparse_.mp_value_bytes < 2.0 ? 2.0 : 0.0;
      const double positions = kept < width ? (width / std::max(kept, 1.0) < 255.0 ? 1.0 : 5.0) * kept : 0.0;
      const double header = 12.0 + static_cast<double>(options_.frame_header_bytes);
      const double forward = mb * (compressed ? positions + kept * sparse_.mp_value_bytes + scale : width * 4.0) + header;
      const double backward = mb * (compressed ? kept * sparse_.mp_value_bytes + scale : width * 4.0) + header;
      const double link = wire_seconds({.bytes = forward, .rounds = 1}, cluster.link) +
                          wire_seconds({.bytes = backward, .rounds = 1}, cluster.link);
      sum_link += link;
      worst_link = std::max(worst_link, link);
      bytes += (forward + backward) * static_cast<double>(micro) / 2.0;  // each side sends one direction
    }
    worst_bytes = std::max(worst_bytes, bytes);
  }
  const double n = static_cast<double>(micro);
  double schedule = (n - 1.0) * std::max(worst_stage, worst_link) + sum_stage + sum_link;
  // Stages sharing one host: together they cannot compute faster than its cores (each stage's work
  // at one core: processes share no serial part).
  if (cluster.host_cores > 0)
    schedule = std::max(schedule, n * stage_cpu * scaling_.speed(cluster.cores) / cluster.host_cores);
  p.compute_seconds_per_step = n * worst_stage + worst_step;
  p.wire_seconds_per_step = schedule - n * worst_stage;
  p.bytes_per_step_per_rank = worst_bytes;
  const double total = schedule + worst_step;
  p.bubble_fraction = schedule > 0 ? 1.0 - sum_stage * n / (static_cast<double>(stages) * schedule) : 0.0;
  p.samples_per_s = total > 0 ? static_cast<double>(batch) / total : 0.0;
  p.slice_weights.assign(static_cast<size_t>(model), 1.0 / model);
  return p;
}

std::vector<Prediction> CostModel::all_grids(const Cluster& cluster, size_t batch) const {
  // The planner's own arguments, checked where every caller passes (the grid loops run to the node
  // count, s * m must not overflow an int, and a cluster without cores or bandwidth has no throughput).
  FRUGAL_CHECK(cluster.nodes >= 1 && cluster.nodes <= kMaxClusterNodes,
               fmt::format("CostModel: a cluster of {} nodes; expected 1 to {}", cluster.nodes, kMaxClusterNodes));
  FRUGAL_CHECK(std::isfinite(cluster.cores) && cluster.cores > 0 && std::isfinite(cluster.host_cores) &&
                   cluster.host_cores >= 0,
               fmt::format("CostModel: {} cores a node (host {}); expected a positive number", cluster.cores,
                           cluster.host_cores));
  FRUGAL_CHECK(std::isfinite(cluster.link.bytes_per_s) && cluster.link.bytes_per_s > 0 &&
                   std::isfinite(cluster.link.latency_s) && cluster.link.latency_s >= 0,
               fmt::format("CostModel: a link of {} bytes/s and {} s latency; expected a positive rate and a latency "
                           "from 0", cluster.link.bytes_per_s, cluster.link.latency_s));
  std::vector<Prediction> out;
  const int layers = static_cast<int>(sparse_.layer_seconds_per_sample.size());
  // Ranks sharing one host: a stage computes alone on a core (1-thread ranks) while the others wait.
  Cluster stages = cluster;
  if (cluster.host_cores > 0) stages.cores = std::min(1.0, cluster.host_cores);
  for (int s = 2; s <= std::min(cluster.nodes, layers); ++s)
    for (int m = 1; s * m <= cluster.nodes; ++m)
      if (cluster.nodes % (s * m) == 0)
        out.push_back(predict_pipeline(cluster.nodes / (s * m), m, s, 0, {}, stages, batch));
  for (int m = 1; m <= cluster.nodes; ++m) {
    if (cluster.nodes % m != 0) continue;
    const int d = cluster.nodes / m;
    out.push_back(predict(Scheme::mp_sparse, d, m, cluster, batch));
    if (d > 1) out.push_back(predict(Scheme::dct_dp, d, m, cluster, batch));
  }
  if (has_dense_) out.push_back(predict(Scheme::dp_dense, cluster.nodes, 1, cluster, batch));
  return out;
}

}  // namespace frugal::plan
