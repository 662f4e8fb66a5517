#include "core/model.h"

#include <fmt/format.h>

namespace frugal {

void Model::push(std::unique_ptr<Layer> layer) {
  FRUGAL_CHECK(layer != nullptr, "Model::push: null layer");
  layers_.push_back(std::move(layer));
}

void Model::set_backend(Backend* backend) {
  for (const auto& l : layers_) l->set_backend(backend);
}

InputLayer& Model::input() const {
  FRUGAL_CHECK(!layers_.empty(), "the model has no layers");
  auto* in = dynamic_cast<InputLayer*>(layers_.front().get());
  FRUGAL_CHECK(in != nullptr, fmt::format("the first layer must take sparse input; it is {}",
                                          layers_.front()->describe()));
  return *in;
}

OutputLayer& Model::output() const {
  FRUGAL_CHECK(layers_.size() >= 2, "the model needs an input and an output layer");
  auto* out = dynamic_cast<OutputLayer*>(layers_.back().get());
  FRUGAL_CHECK(out != nullptr, fmt::format("the last layer must own the loss (a softmax output); it is {}",
                                           layers_.back()->describe()));
  return *out;
}

std::vector<HiddenLayer*> Model::hidden() const {
  std::vector<HiddenLayer*> out;
  for (size_t i = 1; i + 1 < layers_.size(); ++i) {
    auto* h = dynamic_cast<HiddenLayer*>(layers_[i].get());
    FRUGAL_CHECK(h != nullptr, fmt::format("layer {} ({}) must be a dense-to-dense layer", i,
                                           layers_[i]->describe()));
    out.push_back(h);
  }
  return out;
}

std::vector<Parameter*> Model::parameters() const {
  std::vector<Parameter*> out;
  for (const auto& l : layers_)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

size_t Model::num_parameters() const {
  size_t n = 0;
  for (const Parameter* p : parameters()) n += p->value.size();
  return n;
}

std::string Model::describe() const {
  std::string s;
  for (const auto& l : layers_) s += (s.empty() ? "" : " -> ") + l->describe();
  return s;
}

void Model::validate() const {
  input();
  output();
  hidden();
  for (size_t i = 1; i < layers_.size(); ++i)
    FRUGAL_CHECK(layers_[i - 1]->out_features() == layers_[i]->in_features(),
                 fmt::format("layer {} ({}) takes {} inputs but layer {} ({}) gives {}", i,
                             layers_[i]->describe(), layers_[i]->in_features(), i - 1,
                             layers_[i - 1]->describe(), layers_[i - 1]->out_features()));
}

}  // namespace frugal
