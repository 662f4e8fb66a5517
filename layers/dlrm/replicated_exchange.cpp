#include "layers/dlrm/replicated_exchange.h"

#include <cstring>

#include "core/check.h"

namespace frugal::layers {

const Tensor& ReplicatedExchange::forward(std::span<const uint32_t> rows, size_t n) {
  total_ = group_count(group_, n);
  return tables_.forward(rows, n);
}

void ReplicatedExchange::backward(const Tensor& grad_out) {
  tables_.backward(grad_out);
  for (Parameter* p : tables_.parameters()) {
    FRUGAL_CHECK(p->value.rows() == p->full_rows, "replicated tables: a table is sliced");
    full_.resize(p->value.rows(), p->value.cols());
    full_.zero();
    for (size_t j = 0; j < p->grad.rows.size(); ++j)
      std::memcpy(full_.row(p->grad.rows[j]), p->grad.values.row(j), p->value.cols() * sizeof(float));
    group_.all_reduce(full_.span()).wait();
    p->grad.rows.clear();
    for (size_t r = 0; r < full_.rows(); ++r) {
      const float* v = full_.row(r);
      for (size_t c = 0; c < full_.cols(); ++c)
        if (v[c] != 0.0f) {
          p->grad.rows.push_back(static_cast<uint32_t>(r));
          break;
        }
    }
    p->grad.values.resize(p->grad.rows.size(), p->value.cols());
    for (size_t j = 0; j < p->grad.rows.size(); ++j)
      std::memcpy(p->grad.values.row(j), full_.row(p->grad.rows[j]), p->value.cols() * sizeof(float));
  }
}

}  // namespace frugal::layers
