#include "apps/plan_inputs.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/metrics_lines.h"
#include "core/check.h"
#include "core/parse.h"
#include "core/sealed_json.h"

namespace frugal::plan {
namespace {

// Per-sample phases that shrink with the model slice (each rank computes its neurons' part) and
// those every model rank does whole: LSH codes (each rank hashes the whole hidden vector into its own
// tables) and the step's glue (`other`). Table rebuilds and the optimizer are per step (the
// calibration's rows: its tables, its batch's touched rows). `wait` is communication and `compress`
// DCT's, which the model prices itself.
constexpr const char* kSlicedPhases[] = {"input_forward", "dense_layers", "sample", "output_forward",
                                         "output_backward", "input_backward"};
constexpr const char* kReplicatedPhases[] = {"hash", "other"};

double value_bytes_of(const std::string& dtype) {
  if (dtype == "f32") return 4.0;
  if (dtype == "bf16" || dtype == "f16") return 2.0;
  if (dtype == "i8") return 1.0;
  if (dtype == "sign") return 0.125;
  throw Error(fmt::format("unknown wire value type '{}'", dtype));
}

double number_or(const nlohmann::json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

Scheme RunMetrics::scheme() const {
  if (dense) return Scheme::dp_dense;
  if (stages > 1) return Scheme::pipeline;
  return dp_keep < 1.0 && data > 1 ? Scheme::dct_dp : Scheme::mp_sparse;
}

RunMetrics read_run_metrics(const std::string& path) {
  RunMetrics r;
  r.path = path;
  cli::for_each_metrics_line(path, [&](nlohmann::json& j) {
    const std::string event = j.value("event", "");
    if (event == "start" && !r.start_line) r.start_line = std::make_shared<nlohmann::json>(std::move(j));
    else if (event == "epoch") r.epoch_line = std::make_shared<nlohmann::json>(std::move(j));
  });
  FRUGAL_CHECK(r.start_line != nullptr, fmt::format("{}: no start line (is it a `frugal train --metrics` file?)", path));
  FRUGAL_CHECK(r.epoch_line != nullptr, fmt::format("{}: no epoch line: the run ended before its first epoch", path));
  const nlohmann::json& s = *r.start_line;
  const nlohmann::json& e = *r.epoch_line;
  FRUGAL_CHECK(s.contains("config") && s["config"].is_object(), fmt::format("{}: the start line has no config", path));
  const nlohmann::json& c = s["config"];
  try {
    r.world_size = s.value("world_size", 1);
    if (s.contains("grid") && s["grid"].is_array() && (s["grid"].size() == 2 || s["grid"].size() == 3)) {
      r.data = s["grid"][0].get<int>();
      r.model = s["grid"][1].get<int>();
      if (s["grid"].size() == 3) r.stages = s["grid"][2].get<int>();
    }
    if (s.contains("pipeline") && s["pipeline"].is_object()) {
      r.micro_batches = s["pipeline"].value("micro_batches", size_t{0});
      r.stage_split = s["pipeline"].value("split", std::vector<size_t>{});
    }
    r.threads = s.value("threads", 1);
    r.overlap = s.value("overlap", false);
    // Runs from before --overlap-forward never split the input layer.
    const std::string split = s.value("overlap_forward", std::string("off"));
    r.forward_split = split == "on" ? ForwardSplit::always : split == "auto" ? ForwardSplit::automatic : ForwardSplit::never;
    r.dense = c.value("parallel", std::string("model")) == "data";
    r.batch = c.value("batch", size_t{0});
    r.dp_keep = c.contains("dp_keep") && c["dp_keep"].is_number() ? c["dp_keep"].get<double>() : 1.0;
    r.mp_keep = number_or(c, "mp_keep", 1.0);
    r.samples_per_s = e.value("train_samples_per_s", 0.0);
    r.seconds = e.value("train_seconds", 0.0);
    r.steps = e.value("steps", size_t{0});
    if (e.contains("profile")) r.samples = e["profile"].value("samples", size_t{0});
  } catch (const nlohmann::json::exception& ex) {
    throw Error(fmt::format("{}: unexpected value in the start or epoch line ({})", path, json_error_words(ex)));
  }
  FRUGAL_CHECK(r.batch > 0, fmt::format("{}: the config has no batch", path));
  FRUGAL_CHECK(r.samples_per_s > 0, fmt::format("{}: the epoch line has no train_samples_per_s", path));
  return r;
}

Calibration sparse_calibration(const RunMetrics& run) {
  FRUGAL_CHECK(run.world_size == 1, fmt::format("{}: a calibration is a 1-rank run; this one had {} ranks (give "
                                                "it to --validate instead)", run.path, run.world_size));
  FRUGAL_CHECK(!run.dense, fmt::format("{}: a --parallel data run calibrates the dense baseline only", run.path));
  const nlohmann::json& e = *run.epoch_line;
  const nlohmann::json& c = (*run.start_line)["config"];
  FRUGAL_CHECK(e.contains("profile") && e["profile"].contains("phases"),
               fmt::format("{}: the epoch line has no profile", run.path));
  FRUGAL_CHECK(e.contains("parameter_rows") && e["parameter_rows"].is_array(),
               fmt::format("{}: the epoch line has no parameter_rows (written by frugal train since the cost model; "
                           "rerun the calibration)", run.path));
  const nlohmann::json& phases = e["profile"]["phases"];
  const double samples = std::max<double>(1, static_cast<double>(run.samples));
  Calibration cal;
  cal.batch = run.batch;
  cal.threads = run.threads;
  const auto phase_seconds = [&](const char* name) {
    return phases.contains(name) ? phases[name].value("seconds", 0.0) : 0.0;
  };
  double profiled = 0;
  for (const char* p : kSlicedPhases) cal.sliced_seconds_per_sample += phase_seconds(p) / samples;
  for (const char* p : kReplicatedPhases) cal.replicated_seconds_per_sample += phase_seconds(p) / samples;
  const double steps = std::max<double>(1, static_cast<double>(run.steps));
  cal.rebuild_seconds_per_step = phase_seconds("rebuild") / steps;
  cal.optimizer_seconds_per_step = phase_seconds("optimizer") / steps;
  cal.input_forward_seconds_per_sample = phase_seconds("input_forward") / samples;
  for (const auto& [name, t] : phases.items()) profiled += t.value("seconds", 0.0);
  // The loop's time outside the steps (reading batches): every model rank reads the same batch.
  cal.replicated_seconds_per_sample += std::max(0.0, run.seconds - profiled) / samples;
  // Sliced boundaries: every hidden layer's output (the MLP's --layers, else the XMC network's hidden).
  if (c.contains("layers") && c["layers"].is_array() && !c["layers"].empty()) {
    for (const auto& w : c["layers"]) cal.boundaries.push_back(w.get<size_t>());
  } else if (c.contains("layers") && c["layers"].is_string() && !c["layers"].get<std::string>().empty()) {
    cal.boundaries = parse_list<size_t>(fmt::format("{}: config layers", run.path), c["layers"].get<std::string>(),
                                        "width", "positive integers separated by commas", [](size_t w) { return w > 0; });
  } else {
    cal.boundaries.push_back(c.value("hidden", size_t{128}));
  }
  // The profile counts 2 flops per nonzero and neuron plus 2 per neuron (bias, activation); the
  // trainer's rule counts the multiply-adds of the nonzeros only.
  if (phases.contains("input_forward") && !cal.boundaries.empty())
    cal.input_multiply_adds_per_sample = std::max(
        0.0, phases["input_forward"].value("flops", 0.0) / 2 / samples - static_cast<double>(cal.boundaries.front()));
  // Per layer, for pipeline stages: the input layer's phases, the dense layers' time shared by their
  // multiply-adds, the output layer's phases (with LSH hashing and sampling); `other` shared by
  // those; the loop's time outside the steps is every stage's.
  {
    const std::vector<size_t>& w = cal.boundaries;
    std::vector<double> layer(w.size() + 1, 0.0), forward(w.size() + 1, 0.0);
    layer[0] = (phase_seconds("input_forward") + phase_seconds("input_backward")) / samples;
    forward[0] = phase_seconds("input_forward") / samples;
    double dense_work = 0;
    for (size_t i = 1; i < w.size(); ++i) dense_work += static_cast<double>(w[i - 1] * w[i]);
    for (size_t i = 1; i < w.size(); ++i) {
      layer[i] = dense_work > 0 ? phase_seconds("dense_layers") / samples * static_cast<double>(w[i - 1] * w[i]) / dense_work
                                : 0.0;
      forward[i] = layer[i] / 3.0;  // one product forward, two backward
    }
    layer.back() = (phase_seconds("hash") + phase_seconds("sample") + phase_seconds("output_forward") +
                    phase_seconds("output_backward")) / samples;
    forward.back() = (phase_seconds("hash") + phase_seconds("sample") + phase_seconds("output_forward")) / samples;
    double total = 0;
    for (const double t : layer) total += t;
    const double other = phase_seconds("other") / samples;
    for (double& t : layer) t += total > 0 ? other * t / total : other / static_cast<double>(layer.size());
    cal.layer_seconds_per_sample = layer;
    cal.layer_forward_seconds_per_sample = forward;
    cal.stage_seconds_per_sample = std::max(0.0, run.seconds - profiled) / samples;
  }
  size_t dense_seen = 0;
  for (const auto& p : e["parameter_rows"]) {
    ParameterShape shape;
    shape.name = p.value("name", std::string());
    shape.rows = p.value("full_rows", size_t{0});
    shape.cols = p.value("full_cols", size_t{0});
    shape.sliced_axis = p.value("sliced_axis", -1);
    shape.touched_rows_per_step = p.value("touched_rows_per_step", 0.0);
    shape.input_layer = shape.name.rfind("sparse_dense.", 0) == 0;
    // Parameters come layer by layer: the input layer's, each dense layer's (weight first), the output's.
    if (shape.name == "dense.weight") ++dense_seen;
    shape.layer = shape.input_layer ? 0 : shape.name.rfind("dense.", 0) == 0 ? dense_seen : cal.boundaries.size();
    cal.parameters.push_back(shape);
  }
  cal = with_exchanges_of(cal, run);
  return cal;
}

Calibration with_exchanges_of(Calibration c, const RunMetrics& run) {
  const nlohmann::json& config = (*run.start_line)["config"];
  c.mp_keep = run.mp_keep;
  c.mp_value_bytes = value_bytes_of(config.value("mp_wire_dtype", std::string("f32")));
  if (run.dp_keep < 1.0) {
    c.dp_keep = run.dp_keep;
    c.dp_keep_input = number_or(config, "dp_keep_input", std::min(1.0, 2.5 * run.dp_keep));
    c.dp_value_bytes = value_bytes_of(config.value("dp_wire_dtype", std::string("bf16")));
  }
  return c;
}

DenseCalibration dense_calibration(const RunMetrics& run) {
  FRUGAL_CHECK(run.world_size == 1 && run.dense,
               fmt::format("{}: the dense calibration is a 1-rank --parallel data run", run.path));
  const nlohmann::json& e = *run.epoch_line;
  DenseCalibration d;
  d.batch = run.batch;
  d.threads = run.threads;
  // Its optimizer moves every row and its tables rebuild on their schedule: per step; the rest per sample.
  FRUGAL_CHECK(e.contains("profile") && e["profile"].contains("phases"),
               fmt::format("{}: the epoch line has no profile", run.path));
  const nlohmann::json& phases = e["profile"]["phases"];
  double per_step = 0;
  for (const char* p : {"optimizer", "rebuild"})
    if (phases.contains(p)) per_step += phases[p].value("seconds", 0.0);
  d.seconds_per_step = per_step / std::max<double>(1, static_cast<double>(run.steps));
  d.seconds_per_sample = std::max(0.0, run.seconds - per_step) / std::max<double>(1, static_cast<double>(run.samples));
  FRUGAL_CHECK(e.contains("parameter_rows"), fmt::format("{}: the epoch line has no parameter_rows", run.path));
  for (const auto& p : e["parameter_rows"])
    d.parameter_floats.push_back(p.value("full_rows", size_t{0}) * p.value("full_cols", size_t{0}));
  return d;
}

Calibrations calibrations_from(const std::vector<RunMetrics>& runs) {
  Calibrations out;
  // Of repeated calibrations (same kind and threads), the fastest: on a shared machine a run is only
  // ever slowed down by what else runs, so the best of a few is the machine's own speed.
  const auto per_sample = [](const RunMetrics& r) { return r.seconds / std::max<double>(1, r.samples); };
  std::map<int, const RunMetrics*> sparse_by_threads;
  const RunMetrics* dense = nullptr;
  for (const RunMetrics& r : runs) {
    if (r.dense) {
      if (!dense || r.threads < dense->threads || (r.threads == dense->threads && per_sample(r) < per_sample(*dense)))
        dense = &r;
    } else {
      // Of a thread count's runs, the largest batch (a smaller one prices micro-batches, below).
      const RunMetrics*& best = sparse_by_threads[r.threads];
      if (!best || r.batch > best->batch || (r.batch == best->batch && per_sample(r) < per_sample(*best))) best = &r;
    }
  }
  if (runs.size() > sparse_by_threads.size() + (dense ? 1 : 0))
    out.notes.push_back("repeated calibrations: the fastest of each kind and thread count is used");
  if (!sparse_by_threads.empty()) {
    out.sparse = sparse_calibration(*sparse_by_threads.begin()->second);
    // A run at the same threads and a smaller batch prices a pipeline's micro-batches (the fastest of
    // the smallest batch's repeats).
    const RunMetrics& chosen = *sparse_by_threads.begin()->second;
    const RunMetrics* small = nullptr;
    for (const RunMetrics& r : runs)
      if (!r.dense && r.threads == chosen.threads && r.batch < chosen.batch &&
          (!small || r.batch < small->batch || (r.batch == small->batch && per_sample(r) < per_sample(*small))))
        small = &r;
    if (small != nullptr) {
      const Calibration c = sparse_calibration(*small);
      out.sparse->small_batch = small->batch;
      out.sparse->small_layer_seconds_per_sample = c.layer_seconds_per_sample;
      out.sparse->small_layer_forward_seconds_per_sample = c.layer_forward_seconds_per_sample;
      out.notes.push_back(fmt::format("per-layer compute at batch {} ({}) and {}: pipeline micro-batches are priced "
                                      "between them", small->batch, small->path, chosen.batch));
    }
    out.sparse_path = sparse_by_threads.begin()->second->path;
    out.sparse_start = sparse_by_threads.begin()->second->start_line;
    out.sparse_epoch = sparse_by_threads.begin()->second->epoch_line;
  }
  if (dense) {
    out.dense = dense_calibration(*dense);
    out.dense_path = dense->path;
  }
  if (sparse_by_threads.size() >= 2) {
    const RunMetrics& a = *sparse_by_threads.begin()->second;
    const RunMetrics& b = *std::prev(sparse_by_threads.end())->second;
    // Seconds per sample of the steps' compute at each thread count.
    const Calibration ca = sparse_calibration(a), cb = sparse_calibration(b);
    out.scaling = ThreadScaling::fit(a.threads, ca.sliced_seconds_per_sample + ca.replicated_seconds_per_sample,
                                     b.threads, cb.sliced_seconds_per_sample + cb.replicated_seconds_per_sample);
    out.scaling_fitted = true;
    out.notes.push_back(fmt::format("thread scaling fitted from {} and {} threads: serial fraction {:.3f}", a.threads,
                                    b.threads, out.scaling.serial_fraction));
  } else {
    out.notes.push_back("one thread count calibrated: compute is assumed to scale linearly with cores (give a second "
                        "calibration run at another --threads to fit Amdahl's law)");
  }
  return out;
}

}  // namespace frugal::plan
