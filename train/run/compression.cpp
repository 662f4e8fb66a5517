#include "train/run/compression.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "comm/codec.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "comm/routed_communicator.h"
#include "core/backend.h"
#include "core/communicator.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/fingerprint.h"
#include "core/data/label_counts_file.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/output.h"
#include "core/parse.h"
#include "core/propensity.h"
#include "core/quote.h"
#include "core/rng.h"
#include "core/say.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/early_stopping.h"
#include "train/metrics_log.h"
#include "train/rebalance.h"
#include "train/resume_choice.h"
#include "train/run/calibration.h"
#include "train/run/compression.h"
#include "train/run/data_defaults.h"
#include "train/run/dct_cost.h"
#include "train/run/dlrm_run.h"
#include "train/run/dp_transport.h"
#include "train/run/epoch_report.h"
#include "train/run/infer_choice.h"
#include "train/run/memory_check.h"
#include "train/run/pipeline_run.h"
#include "train/run/rank_threads.h"
#include "train/run/run_notes.h"
#include "train/run/run_settings.h"
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/trained_model.h"
#include "train/trainer.h"

namespace frugal::run {

DpTargetChoice resolve_dp_target(const RunArgs& a, const data::Dataset& train, const Backend& backend) {
  const size_t batch = std::max<size_t>(1, a.batch), batches = std::min<size_t>(16, std::max<size_t>(1, train.size() / batch));
  std::vector<uint32_t> seen(train.num_features, 0);
  double touched = 0.0;
  for (size_t k = 0; k < batches; ++k) {
    size_t distinct = 0;
    for (size_t i = k * batch; i < std::min(train.size(), (k + 1) * batch); ++i)
      for (const uint32_t f : train.points.features_of(i))
        if (f < seen.size() && seen[f] != k + 1) {
          seen[f] = static_cast<uint32_t>(k + 1);
          ++distinct;
        }
    touched += train.num_features > 0 ? static_cast<double>(distinct) / train.num_features : 0.0;
  }
  touched /= static_cast<double>(batches);
  // At --dp-keep 1 nothing is thresholded: gradients give exactly the uncompressed sum.
  // bf16 storage cannot hold the replicas' small weight changes (check_precision): gradients then.
  // DGC's remedies (--dp-momentum-correction, --dp-local-clip) act on gradients: asked for, they decide.
  // Updates are thresholded on the host's weights: a rank whose model lives on a device (its memory is
  // not the host's, --device emulated) thresholds gradients.
  const bool host_weights = backend.device().is_host();
  // --update-threshold holds rows back in the optimizer, whose row lists updates mode replays: gradients.
  const bool dense_rows = touched >= 0.5 && a.sampler == layers::Sampler::exact && a.dp_keep && *a.dp_keep < 1.0f &&
                          a.update_threshold == 0.0f &&
                          a.precision == Dtype::f32 && !a.dp_momentum_correction && !a.dp_local_clip && host_weights;
  return {dense_rows ? comm::DpTarget::updates : comm::DpTarget::gradients, touched};
}

float auto_dp_energy(const RunArgs& a, bool per_row) {
  if (a.compress_energy > 0.0f) return a.compress_energy;
  return per_row ? kAutoDpEnergyPerRow : kAutoDpEnergyGlobal;
}

std::vector<comm::KeepOverride> dp_keep_overrides(const RunArgs& a, bool per_row) {
  std::vector<comm::KeepOverride> out;
  for (const std::string& text : a.dp_keep_param) {
    const size_t eq = text.find('=');
    const std::optional<float> keep = eq == std::string::npos ? std::nullopt : to_number<float>(text.substr(eq + 1));
    if (eq == 0 || !keep || !(*keep > 0.0f && *keep <= 1.0f))
      throw_bad_value("--dp-keep-param", text, "PREFIX=ETA, a parameter name prefix and a fraction in (0, 1], "
                                               "e.g. softmax.=0.2");
    out.push_back({text.substr(0, eq), *keep});
  }
  if (a.dp_keep_input)
    out.push_back({kInputLayerPrefix, *a.dp_keep_input});
  else if (per_row && a.model == ModelKind::xmc && *a.dp_keep < 1.0f)
    out.push_back({kInputLayerPrefix, static_cast<float>(std::min(1.0, kInputKeepFactor * static_cast<double>(*a.dp_keep)))});
  return out;
}

std::optional<comm::DpCompression> dp_compression(const RunArgs& a, std::optional<comm::DpTarget> target) {
  if (!a.dp_keep) return std::nullopt;
  const comm::DpTarget what = target.value_or(a.dp_compress.value_or(comm::DpTarget::gradients));
  // auto: per-row selection for thresholded gradients of the networks with a sparse input layer
  // (not DLRM, whose exchange is measured with one tau), never with sign values.
  const bool explicit_sign = (a.dp_wire && *a.dp_wire == comm::ValueType::sign) ||
                             (!a.dp_wire && a.wire_dtype.has_value() && *a.wire_dtype == comm::ValueType::sign);
  const bool per_row = a.dp_select ? *a.dp_select == DpSelect::row
                                   : what == comm::DpTarget::gradients && a.model == ModelKind::xmc && !explicit_sign &&
                                         *a.dp_keep < 1.0f;
  // auto: optimizer updates are of one magnitude (Adam normalizes them), so a sign and the
  // selection's mean magnitude carry them (1-bit Adam's observation); gradients span orders of
  // magnitude and keep bf16 values.
  // (The floor sends each touched row's largest entry as a value: no signs under auto either.)
  const bool floor = a.dp_select == DpSelect::floor;
  const comm::ValueType wire = a.dp_wire            ? *a.dp_wire
                               : a.wire_dtype.has_value() ? *a.wire_dtype
                               : *a.dp_keep >= 1.0f ? comm::ValueType::f32
                               : what == comm::DpTarget::updates && !per_row && !floor ? comm::ValueType::sign
                                                                                           : comm::ValueType::bf16;
  FRUGAL_CHECK(a.dp_explore == 0.0f || wire != comm::ValueType::sign,
               fmt::format("--dp-explore sends the explored entries with their values, but DCT-DP's values travel as "
                           "signs ({}): give --dp-wire-dtype bf16 (or f32, f16)",
                           a.dp_wire ? "--dp-wire-dtype sign"
                           : a.wire_dtype.has_value() ? "--wire-dtype sign"
                                                : "the default for exchanged updates with --dp-select global"));
  FRUGAL_CHECK(!floor || wire != comm::ValueType::sign,
               fmt::format("--dp-select floor sends each touched row's largest entry with its value, but DCT-DP's "
                           "values travel as signs ({}): give --dp-wire-dtype bf16 (or f32, f16), or --dp-select global",
                           a.dp_wire ? "--dp-wire-dtype sign" : "--wire-dtype sign"));
  return comm::DpCompression{.keep = *a.dp_keep, .reestimate_every = a.dp_reestimate_every,
                             .exact_tau = a.dp_tau == TauEstimate::exact, .wire = wire, .seed = a.seed,
                             .target = what, .warmup_steps = a.dp_warmup_steps, .per_row = per_row,
                             .row_floor = a.dp_select == DpSelect::floor,
                             .momentum_correction = a.dp_momentum_correction, .local_clipping = a.dp_local_clip,
                             .per_parameter = dp_keep_overrides(a, per_row),
                             .auto_energy = a.compress == Compress::auto_ ? auto_dp_energy(a, per_row) : 0.0f,
                             .explore = a.dp_explore};
}

comm::MpCompression mp_compression(const RunArgs& a) {
  const comm::ValueType wire = a.mp_wire            ? *a.mp_wire
                               : a.wire_dtype.has_value() ? *a.wire_dtype
                               : a.mp_keep != 1.0 || a.mp_mass < 1.0 ? comm::ValueType::i8
                                                                    : comm::ValueType::f32;
  return {.keep = a.mp_keep, .wire = wire, .warmup_steps = a.mp_warmup_steps.value_or(0), .mass = a.mp_mass,
          .straight_through = a.mp_straight_through, .straight_through_steps = a.mp_straight_through_steps,
          .error_feedback = a.mp_error_feedback.value_or(false)};
}

void check_precision(const RunArgs& a) {
  if (a.precision == Dtype::f32) return;
  FRUGAL_CHECK(a.dp_compress != comm::DpTarget::updates,
               "--precision bf16 with --dp-compress updates is not supported (the replicas exchange weight changes "
               "smaller than a bf16 step): use --dp-compress gradients or --precision f32");
}

void check_dgc(const RunArgs& a, const Backend& backend) {
  for (const auto& [on, flag] : {std::pair{a.dp_momentum_correction, "--dp-momentum-correction"},
                                 std::pair{a.dp_local_clip, "--dp-local-clip"}}) {
    FRUGAL_CHECK(!on || a.dp_keep, fmt::format("{} on acts on DCT-DP's thresholded gradients: it needs --dp-keep "
                                               "ETA (and data-parallel replicas, --grid DxM with D > 1)", flag));
    FRUGAL_CHECK(!on || a.dp_compress != comm::DpTarget::updates,
                 fmt::format("{} on acts on gradients; --dp-compress updates exchanges optimizer updates (use "
                             "--dp-compress gradients)", flag));
  }
  FRUGAL_CHECK(!a.dp_local_clip || a.clip_norm > 0.0f,
               "--dp-local-clip on clips each replica's gradient to --clip-norm C / sqrt(replicas): give --clip-norm C");
  FRUGAL_CHECK(a.update_threshold == 0.0f || a.dp_compress != comm::DpTarget::updates,
               "--update-threshold holds rows back in the optimizer; --dp-compress updates exchanges the rows each step "
               "moved: use --dp-compress gradients, or drop --update-threshold");
  FRUGAL_CHECK(a.update_threshold == 0.0f || backend.device().is_host(),
               fmt::format("--update-threshold decides on the host; --device {} keeps the gradients in the device's "
                           "memory: drop the flag on this device", a.device));
  // Updates are the weights' changes, taken on the host: a model in a device's memory cannot.
  FRUGAL_CHECK(a.dp_compress != comm::DpTarget::updates || backend.device().is_host(),
               fmt::format("--dp-compress updates thresholds the weights' changes on the host; --device {} keeps the "
                           "model in the device's memory: use --dp-compress gradients",
                           a.device));
}

void apply_compress(RunArgs& a) {
  FRUGAL_CHECK(a.compress != Compress::off || a.compress_energy == 0.0f,
               "--compress-energy sets --compress auto's target: give --compress auto too");
  if (a.compress != Compress::auto_) return;
  FRUGAL_CHECK(!a.dp_keep && a.mp_keep == 1.0 && a.mp_mass == 1.0 && a.dp_keep_param.empty() && !a.dp_keep_input,
               "--compress auto sets DCT's keep fractions itself: drop --dp-keep, --dp-keep-param, --dp-keep-input, "
               "--mp-keep and --mp-mass (or keep them and use --compress off)");
  a.dp_keep = kAutoDpFloor;
  a.mp_mass = kAutoMpMass;
}

bool link_stands_aside(const RunArgs& a) {
  return a.dp_keep || a.mp_keep != 1.0 || a.mp_mass != 1.0 || !a.dp_keep_param.empty() || a.dp_keep_input ||
         a.model == ModelKind::dlrm || a.parallel == ParallelMode::data;
}

AutoKeepSummary auto_keep_summary(const train::Trainer& trainer) {
  AutoKeepSummary out;
  const comm::ReplicaReducer* reducer = trainer.reducer();
  const size_t n = reducer != nullptr ? reducer->feedback_states() : 0;
  for (size_t i = 0; i < n; ++i) {
    const comm::ReplicaReducer::AutoKeep k = reducer->auto_keep(i);
    out.keep_min = std::min(out.keep_min, k.keep);
    out.keep_max = std::max(out.keep_max, k.keep);
    out.energy_min = std::min(out.energy_min, k.carried_energy);
    out.energy_max = std::max(out.energy_max, k.carried_energy);
    out.backoffs += k.backoffs;
  }
  if (n == 0) out = {.keep_min = 1.0f, .keep_max = 1.0f, .energy_min = 1.0, .energy_max = 1.0, .backoffs = 0};
  return out;
}

std::optional<DpTargetChoice> settle_compression(RunArgs& a, const data::Dataset& train, const Backend& backend) {
  apply_compress(a);
  std::optional<DpTargetChoice> dp_auto;
  if (a.dp_keep && !a.dp_compress && a.parallel != ParallelMode::data) {
    dp_auto = resolve_dp_target(a, train, backend);
    a.dp_compress = dp_auto->target;
  }
  check_precision(a);
  check_dgc(a, backend);
  return dp_auto;
}

std::optional<CompressChoice> choose_link_compression(RunArgs& a, const data::Dataset& train, const Backend& backend,
                                                      comm::Communicator* data_group, std::optional<double>& link_rate,
                                                      std::optional<DpTargetChoice>& dp_auto) {
  if (a.compress != Compress::link) return std::nullopt;
  std::optional<CompressChoice> compress_choice;
  if (link_stands_aside(a) || data_group == nullptr || data_group->size() == 1) {
    // off: the hand-set keeps (or none) as given
  } else if (replicas_share_one_network(*data_group)) {
    if (!a.quiet)
      say("compress link: the {} replicas share this machine's loopback, where compression does not pay: "
                 "the exchange stays uncompressed (--compress auto compresses anyway)\n", data_group->size());
  } else {
    link_rate = probe_link_rate(*data_group);
    RunArgs with_auto = a;
    with_auto.compress = Compress::auto_;
    apply_compress(with_auto);
    compress_choice = probe_compress_choice(*data_group, *link_rate, *dp_compression(with_auto));
    if (!a.quiet) say("{}\n", compress_choice_note(*compress_choice));
  }
  // Model slices alone stay uncompressed: their boundary traffic is small next to a replica's
  // gradients (docs/distributed.md: when to turn --compress auto on).
  a.compress = compress_choice && compress_choice->pays() ? Compress::auto_ : Compress::off;
  if (auto chosen = settle_compression(a, train, backend)) dp_auto = chosen;
  return compress_choice;
}

void add_link_cost(const RunArgs& a, const train::FitResult& fit, double link_rate, bool chosen_by_link,
                   nlohmann::json& line, LinkCostSaid& said) {
  if (a.dp_keep) {
    const DctDpCost cost = dct_dp_cost(fit, link_rate);
    line["dct_dp_cost"] = to_json(cost);
    const std::string flag = chosen_by_link                 ? "--compress auto (chosen by --compress link)"
                             : a.compress == Compress::auto_ ? "--compress auto"
                                                             : "--dp-keep";
    if (!cost.pays() && !said.no_pay && !a.quiet) say("{}\n", does_not_pay_note(cost, flag));
    said.no_pay = said.no_pay || !cost.pays();
  } else {
    const DpExchangeCost cost = dp_exchange_cost(fit, link_rate);
    line["dp_exchange_cost"] = to_json(cost);
    if (cost.would_pay() && !said.would_pay && !a.quiet) say("{}\n", would_pay_note(cost));
    said.would_pay = said.would_pay || cost.would_pay();
  }
}

}  // namespace frugal::run
