// DCT settled for a run: --dp-compress auto's target, the keeps and wires of DCT-DP and DCT-MP,
// --compress auto and link, the combinations refused, and what the link says of the cost.
// Internal to train/run/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/dataset.h"
#include "comm/exchange.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/metrics_log.h"
#include "train/run/dct_cost.h"
#include "train/run/run_args.h"
#include "train/trainer.h"

namespace frugal::run {

// --dp-compress auto. Exchanging optimizer updates trains better where every parameter has a
// gradient in (nearly) every row each step: measured within 0.5 points at 124x on Fashion-MNIST's
// MLP, where thresholded gradients lose 1.9 points. Where rows are sparse (sparse input features,
// an LSH-sampled output layer) each replica's lazy optimizer gives a rarely seen row its large
// first steps, and averaging halves rows only one replica touched: thresholded gradients were 0.4
// to 1.5 points better there (synthetic XMC, GCIDE). The input rows' density is measured on the
// training set's first batches (every rank reads the same data, so every rank decides alike).
struct DpTargetChoice {
  comm::DpTarget target;
  double input_rows_touched;  // mean fraction of input rows a batch touches
};

DpTargetChoice resolve_dp_target(const RunArgs& a, const data::Dataset& train, const Backend& backend);

// --compress auto's DCT-DP energy target: --compress-energy, else the selection's default.
float auto_dp_energy(const RunArgs& a, bool per_row);

// `target`: what DCT-DP thresholds, where the trainer supports only one (DLRM: gradients).
// The sparse input layer's parameters (SparseDense of the XMC and MLP networks).
constexpr const char* kInputLayerPrefix = "sparse_dense.";

// Under per-row selection the input layer keeps this many times --dp-keep by default: its rare rows
// carry the quality (bench/REPORT.md, "per-row selection": synthetic XMC and GCIDE).
constexpr double kInputKeepFactor = 2.5;

// --dp-keep-param's overrides (first), then the input layer's keep: --dp-keep-input, or under per-row
// selection kInputKeepFactor x --dp-keep.
std::vector<comm::KeepOverride> dp_keep_overrides(const RunArgs& a, bool per_row);

std::optional<comm::DpCompression> dp_compression(const RunArgs& a, std::optional<comm::DpTarget> target = {});

comm::MpCompression mp_compression(const RunArgs& a);

// --precision bf16: the combinations that cannot use it (both backends have bf16 storage kernels).
void check_precision(const RunArgs& a);

// DGC's remedies need what they act on.
void check_dgc(const RunArgs& a, const Backend& backend);

// --compress auto: DCT's keep fractions set online. The hand-set keep flags are the expert's way to
// the same settings: with auto they would fight it, so the run refuses them.
void apply_compress(RunArgs& a);

// --compress link (the default) stands aside for the hand-set keeps, the recommendation model (its
// DCT-DP takes --dp-keep) and --parallel data (the dense all-reduce baseline): what those runs did
// before --compress existed. (Decided where link resolves, after the ranks compared their flags,
// so that a rank with another keep flag is named by that flag.)
bool link_stands_aside(const RunArgs& a);

// This replica's automatic keeps over its parameters (ReplicaReducer::auto_keep).
struct AutoKeepSummary {
  float keep_min = 1.0f, keep_max = 0.0f;
  double energy_min = 1.0, energy_max = 0.0;
  uint64_t backoffs = 0;
};

AutoKeepSummary auto_keep_summary(const train::Trainer& trainer);

// --compress and the DCT flags resolved (apply_compress), --dp-compress auto's target chosen where
// --dp-keep asks for DCT-DP (returned: what it chose), and the combinations checked.
std::optional<DpTargetChoice> settle_compression(RunArgs& a, const data::Dataset& train, const Backend& backend);

// --compress link: off where the replicas share one machine or there are none; else the link to the
// other replicas is measured (link_rate) and auto is chosen where compressing pays. The DCT settings
// are resolved again for what it chose (dp_auto: --dp-compress auto's target). Returns what it
// measured and chose (nothing under another --compress).
std::optional<CompressChoice> choose_link_compression(RunArgs& a, const data::Dataset& train, const Backend& backend,
                                                      comm::Communicator* data_group, std::optional<double>& link_rate,
                                                      std::optional<DpTargetChoice>& dp_auto);

// Whether the DCT-DP notes were printed already (once a run each).
struct LinkCostSaid {
  bool no_pay = false, would_pay = false;
};

// DCT-DP between replicas, against the link rate measured between them (apps/dct_cost.h): on, whether
// it pays; off (no --dp-keep), whether it would (the exchange outweighing the step). Into the epoch
// record, and said once.
void add_link_cost(const RunArgs& a, const train::FitResult& fit, double link_rate, bool chosen_by_link,
                   nlohmann::json& line, LinkCostSaid& said);

}  // namespace frugal::run
