#include "core/layer.h"

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"

namespace frugal {

std::string_view to_string(Inference mode) { return mode == Inference::lsh ? "lsh" : "exact"; }

std::string Layer::describe() const {
  return fmt::format("{}({} -> {})", kind(), in_features(), out_features());
}

std::vector<Parameter*> OutputLayer::label_parameters() {
  std::vector<Parameter*> out;
  for (Parameter* p : parameters())
    if (p->sliced_axis == 0 ? p->full_rows == out_features() : p->sliced_axis < 0 && p->value.rows() == out_features())
      out.push_back(p);
  return out;
}

const Tensor& InputLayer::forward_rows(const SparseBatch& x, size_t first, size_t) {
  if (first == 0 || whole_ == nullptr) whole_ = &forward(x);
  return *whole_;
}

Backend& Layer::backend() const { return backend_ != nullptr ? *backend_ : host_backend(); }

void Layer::set_backend(Backend* backend) {
  backend_ = backend;
  for (Parameter* p : parameters()) {
    p->value.set_name(p->name);  // errors about the tensor name the parameter
    place_on(p->value, &this->backend());
  }
}

const Placement& Layer::placement() const {
  static const Placement replicated{};
  return replicated;
}

void OutputLayer::visit_top_k(const Tensor& in, size_t k, const TopLabelsVisitor& visit) {
  std::vector<uint32_t> labels;
  std::vector<float> scores;
  top_k(in, k, labels, scores);
  const size_t rows = in.rows();
  visit(0, Tensor::wrap(labels.data(), rows, rows == 0 ? 0 : labels.size() / rows, Dtype::u32));
}

void OutputLayer::set_inference(const InferenceOptions& options) {
  FRUGAL_CHECK(options.mode == Inference::exact, fmt::format("{} supports only exact inference", kind()));
}

void OutputLayer::accumulate_centroids(const Tensor&, const SparseBatch&) {
  throw Error(fmt::format("{} cannot be initialized from label centroids", kind()));
}

void OutputLayer::finish_centroids(float, std::span<const float>) {
  throw Error(fmt::format("{} cannot be initialized from label centroids", kind()));
}

}  // namespace frugal
