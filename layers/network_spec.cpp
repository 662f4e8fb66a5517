#include "layers/network_spec.h"

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

std::vector<size_t> parse_layer_widths(const std::string& text, std::string_view what) {
  return parse_list<size_t>(what, text, "width", "positive integers separated by commas, e.g. 1024,1024",
                            [](size_t w) { return w > 0; });
}

}  // namespace frugal::layers
