// The network `frugal train` builds, described by the settings that shape it (its flags), so that
// training and inference (`frugal predict` / `frugal evaluate`, Predictor) build the same one. A
// checkpoint's manifest records these settings ("config"; layers/network_config.h converts).
//  - one hidden layer and XMC data: the XMC network (layers/xmc_network.h);
//  - `layers` set or IDX data: the multi-layer perceptron (layers/mlp_network.h), which for one
//    hidden width is the same network, initialized identically.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/placement.h"
#include "layers/lsh/lsh_sampler.h"
#include "layers/softmax_output.h"

namespace frugal::layers {

// The LSH families by name; lsh::Family is the family with its parameters.
enum class HashKind { dwta, simhash };

// The names of NetworkSpec's choices, which are also those of a checkpoint's config and of the
// flags: "exact" / "lsh", "dwta" / "simhash" (data::to_string names the data formats). A name
// that is none of them throws, naming the accepted ones.
std::string_view to_string(Sampler sampler);
std::string_view to_string(HashKind kind);
Sampler sampler_from_string(std::string_view name);
HashKind hash_kind_from_string(std::string_view name);

// Strings rather than enums, as a checkpoint's config records them (layers/network_config.h).
struct NetworkSpec {
  size_t features = 0, labels = 0;
  size_t hidden = 128;
  std::string layers{};         // "W1,W2,...": hidden widths, input side first; empty: one of `hidden`
  std::string format = "xmc";   // the data the network was made for: data::DataFormat xmc or idx
  std::string sampler = "lsh";  // output neurons computed in training: Sampler lsh or exact
  // LSH (sampler lsh): family (HashKind) and its K (0: chosen by lsh::auto_family for the label
  // count, aiming at active_target labels per point; 0: lsh::default_active_target), tables,
  // buckets, active-set bounds, rebuild schedule.
  std::string hash = "dwta";
  int k = 0, bin_size = 8;
  size_t active_target = 0;
  size_t tables = lsh::kDefaultTables, bucket = 128, min_active = 0, max_active = 0;
  uint64_t rebuild_first = 50, rebuild_max = 2000;
  double rebuild_growth = 1.5;
  // Random negatives of the LSH softmax (lsh::LshOptions::negatives and its proposal, logQ).
  size_t negatives = lsh::LshOptions{}.negatives;
  double negatives_uniform = lsh::LshOptions{}.negative_uniform_share;
  bool logq = true;
  uint64_t seed = 1;
  // Storage of the row-sparse weights and their moments (XmcNetworkOptions::precision): "f32" or
  // "bf16". Not part of a checkpoint's config: checkpoints hold f32, and resume in either.
  std::string precision = "f32";

  // The hidden widths: parsed `layers`, or {hidden}.
  std::vector<size_t> hidden_widths() const;
  lsh::LshOptions lsh_options() const;
};

// Adds the network's layers to `model`, every layer sliced over `placement`'s group.
void build_network(Model& model, const NetworkSpec& spec, const Placement& placement);

// Pipeline stages (`frugal train --pipeline S`): the network's layers in order are the input
// layer, one dense layer per further hidden width and the output layer; a stage builds
// [first_layer, end_layer) of them, each initialized as in the whole network.
size_t network_layer_count(const NetworkSpec& spec);
// `placement`: the stage's layers sliced over a group (`--grid DxMxS`, M > 1), else replicated.
void build_network_stage(Model& model, const NetworkSpec& spec, size_t first_layer, size_t end_layer,
                         const Placement& placement = {});
// Estimated floating-point operations per training sample of each layer (forward and backward):
// what `--stage-split auto` balances. `nonzeros`: the input's mean nonzeros per point.
std::vector<double> layer_costs(const NetworkSpec& spec, double nonzeros);

// Parses "1024,512" into {1024, 512}; every width must be a positive integer. `what` names the
// text in errors.
std::vector<size_t> parse_layer_widths(const std::string& text, std::string_view what = "NetworkSpec::layers");

}  // namespace frugal::layers
