// Model: the ordered layers of a network. The first must be an InputLayer, the last an OutputLayer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/layer.h"

namespace frugal {

class Model {
 public:
  // model.add<layers::SparseDense>({.in = ..., .out = ...}): each layer type names its Options.
  template <class L>
  L& add(const typename L::Options& options) {
    auto layer = std::make_unique<L>(options);
    L& ref = *layer;
    push(std::move(layer));
    return ref;
  }
  void push(std::unique_ptr<Layer> layer);

  InputLayer& input() const;
  OutputLayer& output() const;
  std::vector<HiddenLayer*> hidden() const;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  std::vector<Parameter*> parameters() const;
  size_t num_parameters() const;
  std::string describe() const;
  // Throws unless the layers chain: input first, output last, widths match.
  void validate() const;
  // Every layer computes on `backend` (core/backend.h); nullptr: on host_backend().
  void set_backend(Backend* backend);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace frugal
