// `frugal plan`: the cost model (apps/plan/cost_model.h) calibrated from 1-rank runs' metrics, predicting
// the samples/s of every D x M grid for clusters of N nodes of C cores at given link rates, printing
// the best grid of each, and checking itself against measured multi-rank runs (--validate).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli_options.h"
#include "apps/commands.h"
#include "apps/plan/cost_model.h"
#include "apps/plan/node_prices.h"
#include "apps/launch/netns_cluster.h"
#include "apps/plan/plan_inputs.h"
#include "apps/plan/plan_probes.h"
#include "core/check.h"
#include "core/staged_file.h"

namespace frugal::cli {
namespace {

// What a plan can be asked about: beyond these a prediction means nothing (and a node count's grid
// loop would run for minutes, or overflow an int).
constexpr int kMaxNodes = plan::kMaxClusterNodes;
constexpr double kMaxCores = 65536;
constexpr double kMaxSeconds = 60;  // --latency, --message-overhead
constexpr size_t kMaxBatch = size_t{1} << 30;

struct PlanArgs {
  std::vector<std::string> metrics;
  std::vector<int> nodes{2, 4, 8, 16, 32, 64};
  std::vector<double> cores{2, 4, 16};
  std::vector<std::string> links{"100mbit", "1gbit", "10gbit"};
  double latency = 50e-6;
  double message_overhead = plan::ModelOptions{}.message_overhead_s;
  bool overlap = true;
  train::ForwardSplit overlap_forward = train::ForwardSplit::automatic;
  std::string loopback_rate = "4gbit";
  size_t batch = 0;
  std::optional<double> dp_keep;
  std::vector<std::string> validate;
  double host_cores = std::max(1u, std::thread::hardware_concurrency());
  std::string json;
  bool one_host = false;      // --one-host: the nodes are ranks sharing this host of --host-cores cores
  std::string prices;         // --prices FILE (apps/plan/node_prices.h)
  size_t epoch_samples = 0;   // --epoch-samples (0: the calibration run's training points)
};

struct NamedLink {
  std::string name;
  plan::Link link;
};

// `what` names where the text came from in errors ("--link", "--validate run.jsonl@fast").
NamedLink named_link(const std::string& text, const PlanArgs& a, const std::string& what) {
  const bool loopback = text == "loopback";
  LinkRate rate;
  try {
    rate = parse_link_rate(loopback ? a.loopback_rate : text);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {} (or loopback)", what, e.what()));
  }
  return {text, {.bytes_per_s = rate.bits_per_second / 8.0, .latency_s = loopback ? 0.0 : a.latency}};
}

// "DxM", or "DxMxS" for a pipeline.
std::string grid_text(const plan::Prediction& p) {
  return p.stages > 1 ? fmt::format("{}x{}x{}", p.data, p.model, p.stages) : fmt::format("{}x{}", p.data, p.model);
}

// What to give frugal train for a plan: the grid, and a pipeline's split and micro-batches.
std::string plan_text(const plan::Prediction& p) {
  if (p.scheme != plan::Scheme::pipeline) return fmt::format("{} {}", plan::to_string(p.scheme), grid_text(p));
  std::string split;
  for (const size_t n : p.stage_split) split += fmt::format("{}{}", split.empty() ? "" : ",", n);
  return fmt::format("pipeline {} (--stage-split {}, {} micro-batches)", grid_text(p), split, p.micro_batches);
}

nlohmann::json to_json(const plan::Prediction& p) {
  return {{"scheme", std::string(plan::to_string(p.scheme))},
          {"grid", grid_text(p)},
          {"plan", plan_text(p)},
          {"stages", p.stages},
          {"micro_batches", p.micro_batches},
          {"stage_split", p.stage_split},
          {"bubble_fraction", p.bubble_fraction},
          {"data", p.data},
          {"model", p.model},
          {"samples_per_s", p.samples_per_s},
          {"compute_seconds_per_step", p.compute_seconds_per_step},
          {"wire_seconds_per_step", p.wire_seconds_per_step},
          {"bytes_per_step_per_rank", p.bytes_per_step_per_rank},
          {"overlapped_seconds_per_step", p.overlapped_seconds_per_step},
          {"slice_weights", p.slice_weights}};
}

std::string weights_text(const std::vector<double>& w) {
  std::string s;
  for (size_t i = 0; i < w.size() && i < 4; ++i) s += fmt::format("{}{:.3f}", i ? "," : "", w[i]);
  if (w.size() > 4) s += fmt::format(",... ({} equal)", w.size());
  return s;
}

plan::ModelOptions options_of(const PlanArgs& a) {
  plan::ModelOptions o;
  o.message_overhead_s = a.message_overhead;
  o.overlap = a.overlap;
  o.forward_split = a.overlap_forward;
  return o;
}

plan::CpuCosts cpu_costs(const plan::ProbeResult& p) {
  return {.compress_seconds_per_entry = p.compress_seconds_per_entry,
          .merge_seconds_per_entry = p.merge_seconds_per_entry,
          .collective_seconds_per_byte = p.collective_seconds_per_byte};
}

plan::CostModel model_from(const plan::Calibrations& cals, const PlanArgs& a, const plan::CpuCosts& cpu) {
  plan::Calibration sparse = *cals.sparse;
  if (a.dp_keep) {
    sparse.dp_keep = *a.dp_keep;
    sparse.dp_keep_input = std::min(1.0, 2.5 * *a.dp_keep);  // frugal train's default for the input layer
  }
  plan::CostModel model(sparse, cals.scaling, options_of(a), cpu);
  if (cals.dense) model.set_dense(*cals.dense);
  return model;
}

// --prices: for every node type and node count, the best grid's samples/s, time and dollars per
// epoch; a node type with a measured speed is one node at that speed. Ends with the cheapest epoch.
void price_plans(const PlanArgs& a, const plan::CostModel& model, const plan::Calibrations& cals, size_t batch,
                 nlohmann::json& out) {
  const std::vector<NodeType> types = read_node_prices(a.prices);
  size_t samples = a.epoch_samples;
  if (samples == 0 && cals.sparse_start != nullptr && cals.sparse_start->contains("train_points"))
    samples = cals.sparse_start->at("train_points").get<size_t>();
  FRUGAL_CHECK(samples > 0, fmt::format("--prices: the calibration run {} does not record its training points "
                                        "(a frugal before this one): give --epoch-samples N",
                                        cals.sparse_path));
  // The model's weights and optimizer state (the calibration's, whole): a node must hold its slice.
  double state_bytes = 0.0;  // {"total": ...} in the epoch line (absent in runs from before it)
  if (cals.sparse_epoch != nullptr && cals.sparse_epoch->contains("model_state_bytes")) {
    const nlohmann::json& m = cals.sparse_epoch->at("model_state_bytes");
    if (m.is_object() && m.contains("total") && m["total"].is_number()) state_bytes = m["total"].get<double>();
  }
  fmt::print("\nwhat an epoch of {} samples costs ({}; prices as that file gives them; model state {:.1f} MiB)\n",
             samples, a.prices, state_bytes / 1048576.0);
  fmt::print("{:<14} {:>5}  {:>14}  {:>10}  {:>12}  {:>10}  {}\n", "node type", "nodes", "samples/s", "epoch",
             "$/epoch", "$/hour", "plan");
  out["prices"] = nlohmann::json::array();
  const nlohmann::json* cheapest = nullptr;
  for (const NodeType& t : types) {
    std::vector<int> counts = t.samples_per_s ? std::vector<int>{1} : a.nodes;
    for (const int nodes : counts) {
      double sps = 0;
      std::string plan_name = "measured";
      int slices = 1;  // the ranks the model is sliced over
      if (t.samples_per_s) {
        sps = *t.samples_per_s;
      } else {
        const NamedLink link = named_link(t.link, a, fmt::format("{}:{}: LINK {}", a.prices, t.line, t.link));
        const plan::Cluster cluster{.nodes = nodes, .cores = t.cores, .link = link.link};
        const plan::Prediction* best = nullptr;
        const std::vector<plan::Prediction> all = model.all_grids(cluster, batch);
        for (const plan::Prediction& p : all)
          if (!best || p.samples_per_s > best->samples_per_s) best = &p;
        if (best == nullptr) continue;
        sps = best->samples_per_s;
        slices = best->model * best->stages;
        plan_name = plan_text(*best);
      }
      const bool fits = state_bytes / slices <= t.memory_gib * 1073741824.0;
      if (!fits)
        plan_name += fmt::format(" (does not fit: {:.1f} MiB of model state a node, {:g} GiB of memory)",
                                 state_bytes / slices / 1048576.0, t.memory_gib);
      const double seconds = static_cast<double>(samples) / sps;
      const double per_hour = nodes * t.usd_per_hour;
      const double dollars = per_hour * seconds / 3600.0;
      fmt::print("{:<14} {:>5}  {:>14.0f}  {:>9.3g}s  {:>12.3g}  {:>10.2f}  {}\n", t.name, nodes, sps, seconds, dollars,
                 per_hour, plan_name);
      out["prices"].push_back({{"node_type", t.name}, {"nodes", nodes}, {"samples_per_s", sps},
                               {"epoch_seconds", seconds}, {"usd_per_epoch", dollars}, {"usd_per_hour", per_hour},
                               {"plan", plan_name}, {"measured", t.samples_per_s.has_value()}, {"fits", fits}});
    }
  }
  for (const nlohmann::json& p : out["prices"])
    if (p["fits"].get<bool>() &&
        (!cheapest || p["usd_per_epoch"].get<double>() < (*cheapest)["usd_per_epoch"].get<double>()))
      cheapest = &p;
  if (cheapest == nullptr) fmt::print("cheapest epoch: none (no node type holds the model)\n");
  else
    fmt::print("cheapest epoch: {} x {} ({}), ${:.3g} in {:.3g} s\n", (*cheapest)["nodes"].get<int>(),
               (*cheapest)["node_type"].get<std::string>(), (*cheapest)["plan"].get<std::string>(),
               (*cheapest)["usd_per_epoch"].get<double>(), (*cheapest)["epoch_seconds"].get<double>());
}

void run_plan(const PlanArgs& a) {
  std::vector<plan::RunMetrics> runs;
  for (const std::string& path : a.metrics) runs.push_back(plan::read_run_metrics(path));
  const plan::Calibrations cals = plan::calibrations_from(runs);
  FRUGAL_CHECK(cals.sparse.has_value(), "frugal plan: no 1-rank sparse run among --metrics (run `frugal train ... "
                                        "--max-steps 40 --metrics calib.jsonl` on one rank first)");
  const size_t width = cals.sparse->boundaries.empty() ? 128 : cals.sparse->boundaries.front();
  const plan::ProbeResult probe = plan::probe_machine(a.dp_keep.value_or(cals.sparse->dp_keep), width);
  const plan::CpuCosts cpu = cpu_costs(probe);
  const plan::CostModel model = model_from(cals, a, cpu);
  nlohmann::json out = {{"predictions", nlohmann::json::array()}, {"best", nlohmann::json::array()},
                        {"validation", nlohmann::json::array()}, {"notes", cals.notes}};
  const plan::Calibration& cal = model.sparse();
  fmt::print("calibration: {} ({} threads, batch {}): {:.1f} us/sample sliced + {:.1f} us/sample replicated{}\n",
             cals.sparse_path, cal.threads, cal.batch, cal.sliced_seconds_per_sample * 1e6,
             cal.replicated_seconds_per_sample * 1e6,
             model.has_dense() ? fmt::format("; dense baseline: {}", cals.dense_path)
                               : std::string("; no dense baseline (no --parallel data run)"));
  out["calibration"] = {{"sparse", cals.sparse_path}, {"dense", cals.dense_path}};
  for (const std::string& n : cals.notes) fmt::print("note: {}\n", n);
  fmt::print("probed here (1 thread): DCT-DP {:.1f} ns per touched entry + {:.1f} ns per merged entry; collectives "
             "{:.2f} ns of CPU per byte sent\n", cpu.compress_seconds_per_entry * 1e9, cpu.merge_seconds_per_entry * 1e9,
             cpu.collective_seconds_per_byte * 1e9);
  out["probe"] = {{"compress_seconds_per_entry", cpu.compress_seconds_per_entry},
                  {"merge_seconds_per_entry", cpu.merge_seconds_per_entry},
                  {"collective_seconds_per_byte", cpu.collective_seconds_per_byte}};
  const size_t batch = a.batch;
  for (const std::string& link_text : a.links) {
    const NamedLink link = named_link(link_text, a, fmt::format("--link {}", link_text));
    // --one-host: a single table of ranks sharing this host (each a 1-thread rank).
    const std::vector<double> core_counts = a.one_host ? std::vector<double>{0.0} : a.cores;
    for (const double cores : core_counts) {
      if (a.one_host)
        fmt::print("\n{} links, N ranks of 1 thread sharing one host of {} cores (samples/s; best grid of each "
                   "scheme)\n", link.name, a.host_cores);
      else
        fmt::print("\n{} links, {} cores per node (samples/s; best grid DxM of each scheme)\n", link.name, cores);
      fmt::print("{:>6}  {:>22}  {:>22}  {:>14}  {:>22}  {}\n", "nodes", "mp-sparse", "dct-dp", "dp-dense", "pipeline",
                 "best");
      for (const int nodes : a.nodes) {
        const plan::Cluster cluster = a.one_host ? plan::Cluster{.nodes = nodes,
                                                                 .cores = cals.scaling.rank_cores(a.host_cores, nodes, 1),
                                                                 .link = link.link, .host_cores = a.host_cores}
                                                 : plan::Cluster{.nodes = nodes, .cores = cores, .link = link.link};
        const std::vector<plan::Prediction> all = model.all_grids(cluster, batch);
        std::map<plan::Scheme, const plan::Prediction*> best_of;
        const plan::Prediction* best = nullptr;
        for (const plan::Prediction& p : all) {
          nlohmann::json j = to_json(p);
          j["nodes"] = nodes;
          j["cores"] = cluster.cores;
          j["one_host"] = a.one_host;
          j["link"] = link.name;
          j["link_bytes_per_s"] = link.link.bytes_per_s;
          out["predictions"].push_back(j);
          const plan::Prediction*& b = best_of[p.scheme];
          if (!b || p.samples_per_s > b->samples_per_s) b = &p;
          if (!best || p.samples_per_s > best->samples_per_s) best = &p;
        }
        // No grid with a throughput (a calibration whose phases took no time, or numbers beyond
        // reason): no best grid is named.
        FRUGAL_CHECK(best != nullptr && std::isfinite(best->samples_per_s) && best->samples_per_s > 0,
                     fmt::format("no grid of {} nodes has a throughput the cost model can predict from {} (its "
                                 "phases take no time, or its numbers are beyond reason): no best grid",
                                 nodes, cals.sparse_path));
        const auto cell = [&](plan::Scheme s) {
          const auto it = best_of.find(s);
          return it == best_of.end() ? std::string("-")
                                     : fmt::format("{:.0f} ({})", it->second->samples_per_s, grid_text(*it->second));
        };
        fmt::print("{:>6}  {:>22}  {:>22}  {:>14}  {:>22}  {}{}\n", nodes, cell(plan::Scheme::mp_sparse),
                   cell(plan::Scheme::dct_dp), cell(plan::Scheme::dp_dense), cell(plan::Scheme::pipeline),
                   plan_text(*best),
                   best->model > 1 ? fmt::format(", slice weights {}", weights_text(best->slice_weights)) : "");
        nlohmann::json j = to_json(*best);
        j["nodes"] = nodes;
        j["cores"] = cluster.cores;
        j["one_host"] = a.one_host;
        j["link"] = link.name;
        out["best"].push_back(j);
      }
    }
  }
  if (!a.prices.empty()) price_plans(a, model, cals, batch, out);
  if (!a.validate.empty()) {
    fmt::print("\nvalidation: measured runs against the model (ranks share a host of {} cores)\n", a.host_cores);
    fmt::print("{:<44} {:>9} {:>5} {:>9} {:>10} {:>10} {:>7}\n", "run", "scheme", "grid", "link", "measured",
               "predicted", "error");
    double worst = 0;
    for (const std::string& spec : a.validate) {
      const size_t at = spec.rfind('@');
      FRUGAL_CHECK(at != std::string::npos && at > 0 && at + 1 < spec.size(),
                   fmt::format("--validate {}: expected FILE@LINK, e.g. run.jsonl@1gbit or run.jsonl@loopback", spec));
      const plan::RunMetrics run = plan::read_run_metrics(spec.substr(0, at));
      const NamedLink link = named_link(spec.substr(at + 1), a, fmt::format("--validate {}", spec));
      FRUGAL_CHECK(run.data * run.model * run.stages == run.world_size,
                   fmt::format("{}: grid {}x{}x{} does not cover its {} ranks", run.path, run.data, run.model,
                               run.stages, run.world_size));
      plan::Calibration cal_run = plan::with_exchanges_of(model.sparse(), run);
      plan::ModelOptions run_options = options_of(a);
      run_options.overlap = run.overlap;  // as the measured run trained
      run_options.forward_split = run.forward_split;
      plan::CostModel m(cal_run, cals.scaling, run_options, cpu);
      if (cals.dense) m.set_dense(*cals.dense);
      FRUGAL_CHECK(run.scheme() != plan::Scheme::dp_dense || m.has_dense(),
                   fmt::format("{}: a --parallel data run needs a dense calibration (a 1-rank --parallel data run "
                               "among --metrics)", run.path));
      // Ranks of one host share its cores (ThreadScaling::rank_cores says how).
      const double cores = cals.scaling.rank_cores(a.host_cores, run.world_size, run.threads);
      const int data = run.dense ? run.world_size : run.data, mdl = run.dense ? 1 : run.model;
      // A pipeline's stages take turns on the host's cores: each computes at its threads' cores
      // alone, and the host's cores bound their sum (plan::Cluster::host_cores).
      const bool pipeline = run.scheme() == plan::Scheme::pipeline;
      const plan::Cluster cluster{.nodes = run.world_size,
                                  .cores = pipeline ? std::min<double>(run.threads, a.host_cores) : cores,
                                  .link = link.link, .host_cores = pipeline ? a.host_cores : 0.0};
      const plan::Prediction p =
          run.scheme() == plan::Scheme::pipeline
              ? m.predict_pipeline(run.data, run.model, run.stages, run.micro_batches, run.stage_split, cluster, run.batch)
              : m.predict(run.scheme(), data, mdl, cluster, run.batch);
      const double error = (p.samples_per_s - run.samples_per_s) / run.samples_per_s;
      worst = std::max(worst, std::abs(error));
      // DCT-MP (--mp-keep below 1) is the model-parallel scheme with a thresholded exchange.
      const std::string scheme = run.mp_keep < 1.0 && run.scheme() == plan::Scheme::mp_sparse
                                     ? std::string("dct-mp") : std::string(plan::to_string(run.scheme()));
      fmt::print("{:<44} {:>9} {:>5} {:>9} {:>10.1f} {:>10.1f} {:>+6.1f}%\n", run.path, scheme, grid_text(p), link.name,
                 run.samples_per_s, p.samples_per_s, 100.0 * error);
      nlohmann::json j = to_json(p);
      j["file"] = run.path;
      j["scheme"] = scheme;
      j["ranks"] = run.world_size;
      j["link"] = link.name;
      j["cores_per_rank"] = cores;
      j["measured_samples_per_s"] = run.samples_per_s;
      j["predicted_samples_per_s"] = p.samples_per_s;
      j["measured_bytes_per_sample"] = run.epoch_line->value("bytes_sent_per_sample", 0.0);
      // (A pipeline's bytes are the most any stage sends, per point of its batch.)
      const double group_points = static_cast<double>(run.batch) / data;
      j["predicted_bytes_per_sample"] = group_points > 0 ? p.bytes_per_step_per_rank / group_points : 0.0;
      j["error"] = error;
      out["validation"].push_back(j);
    }
    fmt::print("largest error: {:.1f}%\n", 100.0 * worst);
  }
  if (!a.json.empty()) {  // every write checked; a failed one leaves no partial file (core/staged_file.h)
    StagedFile f(a.json);
    f.write(out.dump(1) + "\n");
    f.commit();
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "predict the samples/s of every data x model grid for N nodes of C cores at a link speed (cost model "
              "calibrated from 1-rank runs' metrics), print the best grid, and check the model against measured runs");
  cmd->add_option("--metrics", a->metrics,
                  "metrics file of a 1-rank calibration run (frugal train --max-steps 40 --metrics F): the sparse "
                  "model; a --parallel data run adds the dense baseline; a second sparse run at another --threads "
                  "fits the thread scaling (repeatable)")
      ->required()->check(CLI::ExistingFile);
  // Bounded: a node count's grids are its divisors (its loop runs to the count), and a core count
  // below 1 predicts no throughput at all.
  cmd->add_option("--nodes", a->nodes, "cluster sizes to plan for")->delimiter(',')->capture_default_str()
      ->check(cli::in_range(1, kMaxNodes));
  cmd->add_option("--cores", a->cores, "cores per node")->delimiter(',')->capture_default_str()
      ->check(cli::in_range(1.0, kMaxCores));
  cmd->add_option("--link", a->links, "link rates (tc units: 100mbit, 1gbit, 10gbit; or loopback)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--latency", a->latency, "one-way link latency in seconds, per round of messages")
      ->capture_default_str()->check(cli::in_range(0.0, kMaxSeconds));
  cmd->add_option("--message-overhead", a->message_overhead,
                  "software cost of a round of messages in seconds (ZeroMQ's small-message all-gather)")
      ->capture_default_str()->check(cli::in_range(0.0, kMaxSeconds));
  cmd->add_option("--overlap", a->overlap, "plan for frugal train --overlap (on: half the input layer's all-gather "
                                            "hides behind its other half, and the input boundary's gradient "
                                            "exchange behind the optimizer where it applies)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}))
      ->capture_default_str();
  add_choice(cmd, "--overlap-forward", a->overlap_forward,
             {{"auto", train::ForwardSplit::automatic}, {"on", train::ForwardSplit::always}, {"off", train::ForwardSplit::never}},
             "plan for frugal train --overlap-forward (auto: the input layer splits where half the batch's work on "
             "a slice reaches 2^20 multiply-adds, from the calibration's profile)");
  cmd->add_option("--loopback-rate", a->loopback_rate, "the rate a `loopback` link stands for")->capture_default_str();
  cmd->add_option("--batch", a->batch, "global batch to plan for (0: the calibration run's)")->capture_default_str()
      ->check(cli::in_range(size_t{0}, kMaxBatch));
  cmd->add_option("--dp-keep", a->dp_keep, "DCT-DP keep fraction of the dct-dp scheme (default: the calibration "
                                           "run's, else 0.02)")
      ->check(cli::in_range(1e-6, 1.0));
  cmd->add_option("--validate", a->validate,
                  "FILE@LINK: rank 0's metrics of a measured multi-rank run and the link it ran on (repeatable)");
  cmd->add_option("--host-cores", a->host_cores, "cores of the host the validated runs' ranks shared")
      ->capture_default_str()->check(cli::in_range(1.0, kMaxCores));
  cmd->add_flag("--one-host", a->one_host, "plan for N ranks of 1 thread sharing one host of --host-cores cores "
                                           "(ranks started on this machine) instead of N nodes of --cores cores");
  cmd->add_option("--json", a->json, "also write predictions, best grids and validation to this JSON file");
  cmd->add_option("--prices", a->prices, "node types and their prices (NAME CORES MEMORY_GIB LINK USD_PER_HOUR "
                                         "[SAMPLES_PER_S] a line; bench/plan/prices.example): prints samples/s, time "
                                         "and dollars per epoch of each at every --nodes count");
  cmd->add_option("--epoch-samples", a->epoch_samples, "--prices: samples in an epoch (default: the calibration "
                                                       "run's training points)")->check(cli::positive());
  cmd->callback([a] {
    try {
      run_plan(*a);
    } catch (const std::exception& e) {
      fmt::print(stderr, "frugal plan: {}\n", e.what());
      std::exit(1);
    }
  });
}

}  // namespace frugal::cli
