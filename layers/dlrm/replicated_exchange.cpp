#include "layers/dlrm/replicated_exchange.h"

namespace frugal::layers {

const Tensor& ReplicatedExchange::forward(std::span<const uint32_t> rows, size_t n) {
  total_ = group_count(group_, n);
  return tables_.forward(rows, n);
}

void ReplicatedExchange::backward(const Tensor& grad_out) {
  // This rank's gradient; the sum over the ranks is the network's table reducer's (comm/).
  tables_.backward(grad_out);
}

}  // namespace frugal::layers
