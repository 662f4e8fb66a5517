#include "train/gradient_clipping.h"

#include <cmath>
#include <cstring>
#include <span>

#include "core/communicator.h"

namespace frugal {

double global_gradient_norm(const std::vector<Parameter*>& params, comm::Communicator* model_group) {
  const bool group = comm::is_active(model_group);
  double squares = 0.0;
  for (const Parameter* p : params) {
    if (group && p->sliced_axis < 0 && model_group->rank() != 0) continue;  // replicated: rank 0 counts it
    Tensor copy;
    const Tensor& values = host_view(p->grad.values, copy);  // a device's gradient comes down
    const float* g = values.data();
    for (size_t i = 0, n = values.size(); i < n; ++i) squares += double(g[i]) * g[i];
  }
  if (group) {
    std::vector<std::vector<std::byte>> all;
    model_group->all_gather_bytes(std::as_bytes(std::span<const double>(&squares, 1)), all).wait();
    squares = 0.0;
    for (const auto& bytes : all) {
      double part = 0.0;
      std::memcpy(&part, bytes.data(), sizeof part);
      squares += part;
    }
  }
  return std::sqrt(squares);
}

double clip_gradient_norm(const std::vector<Parameter*>& params, float max_norm, comm::Communicator* model_group) {
  const double norm = global_gradient_norm(params, model_group);
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  const auto scale = static_cast<float>(coef);
  for (Parameter* p : params) {
    Tensor copy;
    Tensor& values = p->grad.values.is_host() ? p->grad.values : (copy = to_host(p->grad.values));
    for (size_t i = 0, n = values.size(); i < n; ++i) values.data()[i] *= scale;
    if (!p->grad.values.is_host()) copy_from_host(p->grad.values, values.data());
  }
  return norm;
}

}  // namespace frugal
