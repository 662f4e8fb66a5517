#include "train/model_snapshot.h"

#include <sstream>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/check.h"
#include "core/layer.h"
#include "core/model.h"
#include "core/parameter.h"

namespace frugal::train {

void ModelSnapshot::take(const Model& model) {
  const auto params = model.parameters();
  values_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values_[i].resize(params[i]->value.bytes());
    if (!values_[i].empty()) copy_to_host(params[i]->value, values_[i].data());
  }
  layer_states_.clear();
  for (const auto& layer : model.layers()) {
    std::ostringstream out(std::ios::binary);
    {
      cereal::BinaryOutputArchive ar(out);
      layer->save_state(ar);
    }
    layer_states_.push_back(out.str());
  }
}

void ModelSnapshot::restore(Model& model) const {
  const auto params = model.parameters();
  FRUGAL_CHECK(params.size() == values_.size() && model.layers().size() == layer_states_.size(),
               fmt::format("model snapshot: {} parameters and {} layers kept, the model has {} and {}", values_.size(),
                           layer_states_.size(), params.size(), model.layers().size()));
  for (size_t i = 0; i < params.size(); ++i) {
    FRUGAL_CHECK(params[i]->value.bytes() == values_[i].size(),
                 fmt::format("model snapshot: {} has {} bytes, {} were kept", params[i]->name, params[i]->value.bytes(),
                             values_[i].size()));
    if (!values_[i].empty()) copy_from_host(params[i]->value, values_[i].data());
  }
  for (size_t l = 0; l < layer_states_.size(); ++l) {
    std::istringstream in(layer_states_[l], std::ios::binary);
    cereal::BinaryInputArchive ar(in);
    model.layers()[l]->load_state(ar);
  }
}

size_t ModelSnapshot::bytes() const {
  size_t total = 0;
  for (const auto& v : values_) total += v.size();
  for (const auto& s : layer_states_) total += s.size();
  return total;
}

}  // namespace frugal::train
