#include "apps/plan/plan_inputs.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/plot/metrics_lines.h"
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

// What a metrics file may hold and still describe a run the cost model can price: a file edited or
// damaged beyond these is refused naming the field (a width of 10^15 allocated a vector of it, a
// world size of 1e30 became an int's garbage, a negative phase time predicted 0 samples/s).
constexpr double kMaxRanks = 1 << 20;
constexpr double kMaxThreads = 65536;
constexpr double kMaxBatch = double(1 << 30);
constexpr double kMaxWidth = 1 << 24;        // a layer's width
constexpr size_t kMaxLayers = 256;
constexpr double kMaxRows = 4294967296.0;    // a parameter's rows (ids) ...
constexpr double kMaxCols = 1 << 24;         // ... and columns
constexpr double kMaxSeconds = 1e9;
constexpr double kMaxCount = 9007199254740992.0;  // 2^53: steps, samples

// `key` of `j` as a T in [lo, hi] (a whole number for an integral T), or `fallback` when it is absent
// or null; else an error naming `where` (the file and line) and the field.
template <class T>
T field(const nlohmann::json& j, const char* key, T fallback, double lo, double hi, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  const bool integral = std::is_integral_v<T>;
  const double v = it->is_number() ? it->get<double>() : std::nan("");
  if (!std::isfinite(v) || v < lo || v > hi || (integral && v != std::floor(v))) {
    std::string shown = it->dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    throw Error(fmt::format("{}: \"{}\" is {}; expected {} from {} to {}", where, key, shown,
                            integral ? "a whole number" : "a number", lo, hi));
  }
  if constexpr (std::is_integral_v<T>) {
    if (it->is_number_integer()) return static_cast<T>(it->get<int64_t>());
    if (it->is_number_unsigned()) return static_cast<T>(it->get<uint64_t>());
  }
  return static_cast<T>(v);
}

// A phase's seconds in a profile ({"phases": {"hash": {"seconds": ...}}}).
double phase_seconds_of(const nlohmann::json& phases, const std::string& name, const std::string& where) {
  const auto it = phases.find(name);
  if (it == phases.end()) return 0.0;
  FRUGAL_CHECK(it->is_object(), fmt::format("{}: the profile's phase \"{}\" is not an object", where, name));
  return field<double>(*it, "seconds", 0.0, 0.0, kMaxSeconds, fmt::format("{}: phase \"{}\"", where, name));
}

double value_bytes_of(const std::string& dtype, const std::string& where) {
  if (dtype == "f32") return 4.0;
  if (dtype == "bf16" || dtype == "f16") return 2.0;
  if (dtype == "i8") return 1.0;
  if (dtype == "sign") return 0.125;
  throw Error(fmt::format("{}: '{}' is no wire value type (f32, bf16, f16, i8 or sign)", where, dtype));
}

// A text field (the config's wire types and modes), or `fallback`.
std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  FRUGAL_CHECK(it->is_string(), fmt::format("{}: \"{}\" is {}; expected a name", where, key, it->dump()));
  return it->get<std::string>();
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
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) return;  // not a record frugal train writes
    const std::string event = j["event"].get<std::string>();
    if (event == "start" && !r.start_line) r.start_line = std::make_shared<nlohmann::json>(std::move(j));
    else if (event == "epoch") r.epoch_line = std::make_shared<nlohmann::json>(std::move(j));
  });
  FRUGAL_CHECK(r.start_line != nullptr, fmt::format("{}: no start line (is it a `frugal train --metrics` file?)", path));
  FRUGAL_CHECK(r.epoch_line != nullptr, fmt::format("{}: no epoch line: the run ended before its first epoch", path));
  const nlohmann::json& s = *r.start_line;
  const nlohmann::json& e = *r.epoch_line;
  FRUGAL_CHECK(s.contains("config") && s["config"].is_object(), fmt::format("{}: the start line has no config", path));
  const nlohmann::json& c = s["config"];
  const std::string start_at = path + ": the start line", config_at = path + ": the start line's config",
                    epoch_at = path + ": the last epoch line";
  try {
    r.world_size = field<int>(s, "world_size", 1, 1, kMaxRanks, start_at);
    if (s.contains("grid") && s["grid"].is_array() && (s["grid"].size() == 2 || s["grid"].size() == 3)) {
      const nlohmann::json grid = {{"D", s["grid"][0]}, {"M", s["grid"][1]},
                                   {"S", s["grid"].size() == 3 ? s["grid"][2] : nlohmann::json(1)}};
      r.data = field<int>(grid, "D", 1, 1, kMaxRanks, start_at + "'s grid");
      r.model = field<int>(grid, "M", 1, 1, kMaxRanks, start_at + "'s grid");
      r.stages = field<int>(grid, "S", 1, 1, static_cast<double>(kMaxLayers), start_at + "'s grid");
    }
    if (s.contains("pipeline") && s["pipeline"].is_object()) {
      const nlohmann::json& pipe = s["pipeline"];
      r.micro_batches = field<size_t>(pipe, "micro_batches", 0, 0, kMaxBatch, start_at + "'s pipeline");
      if (pipe.contains("split") && pipe["split"].is_array()) {
        FRUGAL_CHECK(pipe["split"].size() <= kMaxLayers,
                     fmt::format("{}'s pipeline: a split of {} stages; expected at most {}", start_at,
                                 pipe["split"].size(), kMaxLayers));
        for (const nlohmann::json& n : pipe["split"])
          r.stage_split.push_back(field<size_t>(nlohmann::json{{"split", n}}, "split", 0, 1,
                                                static_cast<double>(kMaxLayers), start_at + "'s pipeline"));
      }
    }
    r.threads = field<int>(s, "threads", 1, 1, kMaxThreads, start_at);
    r.overlap = s.value("overlap", false);
    // Runs from before --overlap-forward never split the input layer.
    const std::string split = text_or(s, "overlap_forward", "off", start_at);
    r.forward_split = split == "on" ? train::ForwardSplit::always : split == "auto" ? train::ForwardSplit::automatic : train::ForwardSplit::never;
    r.dense = text_or(c, "parallel", "model", config_at) == "data";
    r.batch = field<size_t>(c, "batch", 0, 0, kMaxBatch, config_at);
    r.dp_keep = field<double>(c, "dp_keep", 1.0, 1e-9, 1.0, config_at);
    r.mp_keep = field<double>(c, "mp_keep", 1.0, 1e-9, kMaxWidth, config_at);
    r.samples_per_s = field<double>(e, "train_samples_per_s", 0.0, 0.0, 1e15, epoch_at);
    r.seconds = field<double>(e, "train_seconds", 0.0, 0.0, kMaxSeconds, epoch_at);
    r.steps = field<size_t>(e, "steps", 0, 0, kMaxCount, epoch_at);
    if (e.contains("profile") && e["profile"].is_object())
      r.samples = field<size_t>(e["profile"], "samples", 0, 0, kMaxCount, epoch_at + "'s profile");
  } catch (const nlohmann::json::exception& ex) {
    throw Error(fmt::format("{}: unexpected value in the start or epoch line ({})", path, json_error_words(ex)));
  }
  FRUGAL_CHECK(r.batch > 0, fmt::format("{}: the config has no batch", path));
  FRUGAL_CHECK(r.samples_per_s > 0, fmt::format("{}: the epoch line has no train_samples_per_s", path));
  return r;
}

namespace {

// `body`, with an unexpected JSON type anywhere (a field of another type than frugal train writes)
// refused naming the file instead of in nlohmann's words.
template <class F>
auto naming_file(const RunMetrics& run, F&& body) {
  try {
    return body();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: unexpected value in the start or epoch line ({})", run.path, json_error_words(e)));
  }
}

Calibration sparse_calibration_of(const RunMetrics& run);
Calibration with_exchanges_in(Calibration c, const RunMetrics& run);
DenseCalibration dense_calibration_of(const RunMetrics& run);

}  // namespace

Calibration sparse_calibration(const RunMetrics& run) {
  return naming_file(run, [&] { return sparse_calibration_of(run); });
}

Calibration with_exchanges_of(Calibration c, const RunMetrics& run) {
  return naming_file(run, [&] { return with_exchanges_in(std::move(c), run); });
}

DenseCalibration dense_calibration(const RunMetrics& run) {
  return naming_file(run, [&] { return dense_calibration_of(run); });
}

namespace {

Calibration sparse_calibration_of(const RunMetrics& run) {
  FRUGAL_CHECK(run.world_size == 1, fmt::format("{}: a calibration is a 1-rank run; this one had {} ranks (give "
                                                "it to --validate instead)", run.path, run.world_size));
  FRUGAL_CHECK(!run.dense, fmt::format("{}: a --parallel data run calibrates the dense baseline only", run.path));
  const nlohmann::json& e = *run.epoch_line;
  const nlohmann::json& c = (*run.start_line)["config"];
  FRUGAL_CHECK(e.contains("profile") && e["profile"].is_object() && e["profile"].contains("phases") &&
                   e["profile"]["phases"].is_object(),
               fmt::format("{}: the epoch line has no profile", run.path));
  FRUGAL_CHECK(e.contains("parameter_rows") && e["parameter_rows"].is_array(),
               fmt::format("{}: the epoch line has no parameter_rows (written by frugal train since the cost model; "
                           "rerun the calibration)", run.path));
  const nlohmann::json& phases = e["profile"]["phases"];
  const std::string epoch_at = run.path + ": the last epoch line's profile", config_at = run.path + ": the start line's config";
  const double samples = std::max<double>(1, static_cast<double>(run.samples));
  Calibration cal;
  cal.batch = run.batch;
  cal.threads = run.threads;
  const auto phase_seconds = [&](const std::string& name) { return phase_seconds_of(phases, name, epoch_at); };
  double profiled = 0;
  for (const char* p : kSlicedPhases) cal.sliced_seconds_per_sample += phase_seconds(p) / samples;
  for (const char* p : kReplicatedPhases) cal.replicated_seconds_per_sample += phase_seconds(p) / samples;
  const double steps = std::max<double>(1, static_cast<double>(run.steps));
  cal.rebuild_seconds_per_step = phase_seconds("rebuild") / steps;
  cal.optimizer_seconds_per_step = phase_seconds("optimizer") / steps;
  cal.input_forward_seconds_per_sample = phase_seconds("input_forward") / samples;
  for (const auto& [name, t] : phases.items()) profiled += phase_seconds(name);
  // The loop's time outside the steps (reading batches): every model rank reads the same batch.
  cal.replicated_seconds_per_sample += std::max(0.0, run.seconds - profiled) / samples;
  // Sliced boundaries: every hidden layer's output (the MLP's --layers, else the XMC network's hidden).
  if (c.contains("layers") && c["layers"].is_array() && !c["layers"].empty()) {
    for (const auto& w : c["layers"])
      cal.boundaries.push_back(field<size_t>(nlohmann::json{{"layers", w}}, "layers", 0, 1, kMaxWidth, config_at));
  } else if (c.contains("layers") && c["layers"].is_string() && !c["layers"].get<std::string>().empty()) {
    cal.boundaries = parse_list<size_t>(fmt::format("{}: config layers", run.path), c["layers"].get<std::string>(),
                                        "width", "positive integers separated by commas, each at most 16777216",
                                        [](size_t w) { return w > 0 && static_cast<double>(w) <= kMaxWidth; });
  } else {
    cal.boundaries.push_back(field<size_t>(c, "hidden", 128, 1, kMaxWidth, config_at));
  }
  FRUGAL_CHECK(cal.boundaries.size() < kMaxLayers,
               fmt::format("{}: {} hidden layers; expected fewer than {}", config_at, cal.boundaries.size(), kMaxLayers));
  // The profile counts 2 flops per nonzero and neuron plus 2 per neuron (bias, activation); the
  // trainer's rule counts the multiply-adds of the nonzeros only.
  if (phases.contains("input_forward") && phases["input_forward"].is_object() && !cal.boundaries.empty())
    cal.input_multiply_adds_per_sample =
        std::max(0.0, field<double>(phases["input_forward"], "flops", 0.0, 0.0, 1e30, epoch_at + ": input_forward") /
                              2 / samples -
                          static_cast<double>(cal.boundaries.front()));
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
  const std::string rows_at = run.path + ": the last epoch line's parameter_rows";
  for (const auto& p : e["parameter_rows"]) {
    FRUGAL_CHECK(p.is_object(), fmt::format("{}: an entry that is not an object", rows_at));
    ParameterShape shape;
    shape.name = text_or(p, "name", "", rows_at);
    shape.rows = field<size_t>(p, "full_rows", 0, 0, kMaxRows, rows_at);
    shape.cols = field<size_t>(p, "full_cols", 0, 0, kMaxCols, rows_at);
    shape.sliced_axis = field<int>(p, "sliced_axis", -1, -1, 1, rows_at);
    shape.touched_rows_per_step = field<double>(p, "touched_rows_per_step", 0.0, 0.0, kMaxRows, rows_at);
    shape.input_layer = shape.name.rfind("sparse_dense.", 0) == 0;
    // Parameters come layer by layer: the input layer's, each dense layer's (weight first), the output's.
    if (shape.name == "dense.weight") ++dense_seen;
    shape.layer = shape.input_layer ? 0 : shape.name.rfind("dense.", 0) == 0 ? dense_seen : cal.boundaries.size();
    cal.parameters.push_back(shape);
  }
  cal = with_exchanges_in(cal, run);
  return cal;
}

Calibration with_exchanges_in(Calibration c, const RunMetrics& run) {
  const nlohmann::json& config = (*run.start_line)["config"];
  const std::string config_at = run.path + ": the start line's config";
  c.mp_keep = run.mp_keep;
  c.mp_value_bytes = value_bytes_of(text_or(config, "mp_wire_dtype", "f32", config_at), config_at + "'s mp_wire_dtype");
  if (run.dp_keep < 1.0) {
    c.dp_keep = run.dp_keep;
    c.dp_keep_input = field<double>(config, "dp_keep_input", std::min(1.0, 2.5 * run.dp_keep), 1e-9, 1.0, config_at);
    c.dp_value_bytes = value_bytes_of(text_or(config, "dp_wire_dtype", "bf16", config_at), config_at + "'s dp_wire_dtype");
  }
  return c;
}

DenseCalibration dense_calibration_of(const RunMetrics& run) {
  FRUGAL_CHECK(run.world_size == 1 && run.dense,
               fmt::format("{}: the dense calibration is a 1-rank --parallel data run", run.path));
  const nlohmann::json& e = *run.epoch_line;
  DenseCalibration d;
  d.batch = run.batch;
  d.threads = run.threads;
  // Its optimizer moves every row and its tables rebuild on their schedule: per step; the rest per sample.
  FRUGAL_CHECK(e.contains("profile") && e["profile"].is_object() && e["profile"].contains("phases") &&
                   e["profile"]["phases"].is_object(),
               fmt::format("{}: the epoch line has no profile", run.path));
  const nlohmann::json& phases = e["profile"]["phases"];
  const std::string epoch_at = run.path + ": the last epoch line's profile";
  double per_step = 0;
  for (const char* p : {"optimizer", "rebuild"}) per_step += phase_seconds_of(phases, p, epoch_at);
  d.seconds_per_step = per_step / std::max<double>(1, static_cast<double>(run.steps));
  d.seconds_per_sample = std::max(0.0, run.seconds - per_step) / std::max<double>(1, static_cast<double>(run.samples));
  FRUGAL_CHECK(e.contains("parameter_rows") && e["parameter_rows"].is_array(),
               fmt::format("{}: the epoch line has no parameter_rows", run.path));
  const std::string rows_at = run.path + ": the last epoch line's parameter_rows";
  for (const auto& p : e["parameter_rows"]) {
    FRUGAL_CHECK(p.is_object(), fmt::format("{}: an entry that is not an object", rows_at));
    d.parameter_floats.push_back(field<size_t>(p, "full_rows", 0, 0, kMaxRows, rows_at) *
                                 field<size_t>(p, "full_cols", 0, 0, kMaxCols, rows_at));
  }
  return d;
}

}  // namespace

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
