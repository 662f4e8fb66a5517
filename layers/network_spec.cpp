#include "layers/network_spec.h"

#include <algorithm>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/data_format.h"
#include "core/parse.h"
#include "layers/mlp_network.h"
#include "layers/xmc_network.h"

namespace frugal::layers {

std::string_view to_string(Sampler sampler) { return sampler == Sampler::lsh ? "lsh" : "exact"; }
std::string_view to_string(HashKind kind) { return kind == HashKind::dwta ? "dwta" : "simhash"; }

Sampler sampler_from_string(std::string_view name) {
  for (const Sampler s : {Sampler::lsh, Sampler::exact})
    if (name == to_string(s)) return s;
  throw Error(fmt::format("unknown sampler '{}': expected lsh or exact", name));
}

HashKind hash_kind_from_string(std::string_view name) {
  for (const HashKind k : {HashKind::dwta, HashKind::simhash})
    if (name == to_string(k)) return k;
  throw Error(fmt::format("unknown LSH family '{}': expected dwta or simhash", name));
}

std::vector<size_t> NetworkSpec::hidden_widths() const {
  return layers.empty() ? std::vector<size_t>{hidden} : parse_layer_widths(layers);
}

lsh::LshOptions NetworkSpec::lsh_options() const {
  lsh::LshOptions o;
  if (hash_kind_from_string(hash) == HashKind::dwta)
    o.family = lsh::Dwta{.k = k, .bin_size = bin_size};
  else
    o.family = lsh::SimHash{.k = k};
  if (k <= 0) o.family = lsh::auto_family(o.family, tables, labels, active_target);
  o.tables = tables;
  o.bucket_capacity = bucket;
  o.min_active = min_active;
  o.max_active = max_active;
  o.rebuild_first = rebuild_first;
  o.rebuild_growth = rebuild_growth;
  o.rebuild_max = rebuild_max;
  o.negatives = negatives;
  o.negative_uniform_share = negatives_uniform;
  o.logq = logq;
  return o;
}

void build_network(Model& model, const NetworkSpec& spec, const Placement& placement) {
  const Sampler sampler = sampler_from_string(spec.sampler);
  hash_kind_from_string(spec.hash);  // an unknown family fails here, whichever the sampler
  if (spec.layers.empty() && data::data_format_from_string(spec.format) == data::DataFormat::xmc) {
    build_xmc_network(model, {.features = spec.features, .labels = spec.labels, .hidden = spec.hidden,
                              .sampler = sampler, .lsh = spec.lsh_options(), .seed = spec.seed,
                              .placement = placement, .precision = dtype_from_string(spec.precision)});
    return;
  }
  build_mlp_network(model, {.features = spec.features, .labels = spec.labels, .hidden = spec.hidden_widths(),
                            .sampler = sampler, .lsh = spec.lsh_options(), .seed = spec.seed,
                            .placement = placement, .precision = dtype_from_string(spec.precision)});
}

size_t network_layer_count(const NetworkSpec& spec) { return spec.hidden_widths().size() + 1; }

void build_network_stage(Model& model, const NetworkSpec& spec, size_t first_layer, size_t end_layer,
                         const Placement& placement) {
  // The MLP builder makes the one-hidden-layer XMC network too, initialized identically.
  hash_kind_from_string(spec.hash);
  build_mlp_network(model, {.features = spec.features, .labels = spec.labels, .hidden = spec.hidden_widths(),
                            .sampler = sampler_from_string(spec.sampler), .lsh = spec.lsh_options(), .seed = spec.seed,
                            .placement = placement, .precision = dtype_from_string(spec.precision),
                            .first_layer = first_layer, .end_layer = end_layer});
}

std::vector<double> layer_costs(const NetworkSpec& spec, double nonzeros) {
  const std::vector<size_t> h = spec.hidden_widths();
  std::vector<double> cost;
  // The input layer: its rows of the batch's features forward, their gradients backward.
  cost.push_back(4.0 * nonzeros * static_cast<double>(h[0]));
  for (size_t i = 1; i < h.size(); ++i) cost.push_back(6.0 * static_cast<double>(h[i - 1]) * static_cast<double>(h[i]));
  // The output layer: every label (exact), or the LSH sampler's active set and hashing the input.
  const auto hd = static_cast<double>(h.back());
  double active = static_cast<double>(spec.labels);
  double hashing = 0.0;
  if (sampler_from_string(spec.sampler) == Sampler::lsh) {
    const size_t found = (spec.active_target > 0 ? spec.active_target : lsh::default_active_target(spec.labels)) +
                         spec.negatives;
    active = static_cast<double>(std::min<size_t>(spec.labels, spec.max_active > 0 ? std::min(found, spec.max_active)
                                                                                   : found));
    hashing = static_cast<double>(spec.tables) * hd;
  }
  cost.push_back(6.0 * hd * active + hashing);
  return cost;
}

std::vector<size_t> parse_layer_widths(const std::string& text, std::string_view what) {
  return parse_list<size_t>(what, text, "width", "positive integers separated by commas, e.g. 1024,1024",
                            [](size_t w) { return w > 0; });
}

}  // namespace frugal::layers
