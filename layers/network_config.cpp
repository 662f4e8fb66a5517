#include "layers/network_config.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/data_format.h"

namespace frugal::layers {

nlohmann::json network_config(const NetworkSpec& s) {
  nlohmann::json c = {{"features", s.features}, {"labels", s.labels}, {"hidden", s.hidden},
                      {"sampler", s.sampler},   {"hash", s.hash},     {"k", s.k},
                      {"tables", s.tables},     {"bucket", s.bucket}, {"seed", s.seed}};
  if (!s.layers.empty()) c["layers"] = s.layers;  // only when set: older checkpoints stay resumable
  if (data::data_format_from_string(s.format) != data::DataFormat::xmc) c["format"] = s.format;
  // How the LSH softmax trains (absent from checkpoints made before them).
  if (sampler_from_string(s.sampler) == Sampler::lsh) {
    c["negatives"] = s.negatives;
    c["negatives_uniform"] = s.negatives_uniform;
    c["logq"] = s.logq ? "on" : "off";
    if (s.active_target > 0) c["active_target"] = s.active_target;  // it shapes the tables a checkpoint holds
  }
  return c;
}

namespace {

template <class T>
void read_key(const nlohmann::json& config, const char* key, bool required, const std::string& where, T& out) {
  const auto it = config.find(key);
  if (it == config.end()) {
    FRUGAL_CHECK(!required, fmt::format("{}: the checkpoint's config lacks '{}' (was it saved by `frugal train`? A "
                                        "checkpoint saved through the API needs PredictorOptions::build)",
                                        where, key));
    return;
  }
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("{}: config '{}' is {}, which is not a valid value", where, key, it->dump()));
  }
}

}  // namespace

NetworkSpec network_spec_from_config(const nlohmann::json& config, const std::string& where) {
  FRUGAL_CHECK(config.is_object(), fmt::format("{}: the checkpoint has no config object", where));
  NetworkSpec s;
  read_key(config, "features", true, where, s.features);
  read_key(config, "labels", true, where, s.labels);
  read_key(config, "hidden", false, where, s.hidden);
  read_key(config, "layers", false, where, s.layers);
  read_key(config, "format", false, where, s.format);
  read_key(config, "sampler", false, where, s.sampler);
  read_key(config, "hash", false, where, s.hash);
  read_key(config, "k", false, where, s.k);
  read_key(config, "tables", false, where, s.tables);
  read_key(config, "bucket", false, where, s.bucket);
  read_key(config, "active_target", false, where, s.active_target);
  read_key(config, "seed", false, where, s.seed);
  FRUGAL_CHECK(s.features > 0 && s.labels > 0 && s.hidden > 0,
               fmt::format("{}: config has features = {}, labels = {}, hidden = {}: each must be > 0", where,
                           s.features, s.labels, s.hidden));
  if (!s.layers.empty()) parse_layer_widths(s.layers, where + ": config 'layers'");  // a damaged value fails here
  return s;
}

}  // namespace frugal::layers
