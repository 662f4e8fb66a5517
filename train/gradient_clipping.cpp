#include "train/gradient_clipping.h"

#include <cmath>
#include <cstring>
#include <span>

#include "core/backend.h"
#include "core/communicator.h"

namespace frugal::train {
namespace {
// The backend whose memory holds t (the host backend for host memory).
Backend& backend_of(const Tensor& t) { return t.owner() != nullptr ? *t.owner() : host_backend(); }
}  // namespace

double global_gradient_norm(const std::vector<Parameter*>& params, comm::Communicator* model_group,
                            comm::Communicator* disjoint_group) {
  const bool group = comm::is_active(model_group);
  double squares = 0.0;
  for (const Parameter* p : params) {
    if (group && p->sliced_axis < 0 && model_group->rank() != 0) continue;  // replicated: rank 0 counts it
    // Where the gradient lives: only the sum comes down from a device.
    squares += backend_of(p->grad.values).sum_squares(p->grad.values);
  }
  if (group) {
    const std::vector<double> parts = comm::all_gather_value(*model_group, squares, "gradient norm");
    squares = 0.0;
    for (const double part : parts) squares += part;  // in rank order: the same bits everywhere
  }
  if (comm::is_active(disjoint_group)) {
    const std::vector<double> parts = comm::all_gather_value(*disjoint_group, squares, "stage's gradient norm");
    squares = 0.0;
    for (const double part : parts) squares += part;
  }
  return std::sqrt(squares);
}

double clip_gradient_norm(const std::vector<Parameter*>& params, float max_norm, comm::Communicator* model_group,
                          comm::Communicator* disjoint_group) {
  const double norm = global_gradient_norm(params, model_group, disjoint_group);
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  const auto scale = static_cast<float>(coef);
  for (Parameter* p : params) backend_of(p->grad.values).scale(p->grad.values, scale);
  return norm;
}

}  // namespace frugal::train
