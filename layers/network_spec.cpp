#include "layers/network_spec.h"

#include <charconv>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "core/check.h"
#include "layers/mlp_network.h"
#include "layers/xmc_network.h"

namespace frugal::layers {

std::vector<size_t> NetworkSpec::hidden_widths() const {
  return layers.empty() ? std::vector<size_t>{hidden} : parse_layer_widths(layers);
}

lsh::LshOptions NetworkSpec::lsh_options() const {
  lsh::LshOptions o;
  if (hash == "dwta")
    o.family = lsh::Dwta{.k = k, .bin_size = bin_size};
  else
    o.family = lsh::SimHash{.k = k};
  if (k <= 0) {
    const int chosen = lsh::default_k(o.family, tables, labels);
    std::visit([chosen](auto& f) { f.k = chosen; }, o.family);
  }
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
  FRUGAL_CHECK(spec.sampler == "lsh" || spec.sampler == "exact",
               fmt::format("unknown sampler '{}': expected lsh or exact", spec.sampler));
  FRUGAL_CHECK(spec.hash == "dwta" || spec.hash == "simhash",
               fmt::format("unknown LSH family '{}': expected dwta or simhash", spec.hash));
  const auto sampler = spec.sampler == "lsh" ? Sampler::lsh : Sampler::exact;
  if (spec.layers.empty() && spec.format == "xmc") {
    build_xmc_network(model, {.features = spec.features, .labels = spec.labels, .hidden = spec.hidden,
                              .sampler = sampler, .lsh = spec.lsh_options(), .seed = spec.seed,
                              .placement = placement});
    return;
  }
  build_mlp_network(model, {.features = spec.features, .labels = spec.labels, .hidden = spec.hidden_widths(),
                            .sampler = sampler, .lsh = spec.lsh_options(), .seed = spec.seed,
                            .placement = placement});
}

std::vector<size_t> parse_layer_widths(const std::string& text) {
  std::vector<size_t> out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    size_t width = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), width);
    if (ec != std::errc() || end != item.data() + item.size() || width == 0)
      throw Error(fmt::format("--layers '{}': bad width '{}': expected positive integers separated by commas, "
                              "e.g. 1024,1024",
                              text, item));
    out.push_back(width);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace frugal::layers
