// DotInteraction: DLRM's feature interaction. Of T = 1 + num_fields vectors of one dimension (the
// bottom MLP's output, then one embedding per field) it outputs the bottom vector followed by the
// dot products of every pair (i, j), i > j, in the order i = 1.., j = 0..i-1 (DLRM's lower
// triangle): D + T (T - 1) / 2 columns, the top MLP's input.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace frugal::layers {

class DotInteraction {
 public:
  DotInteraction(size_t num_fields, size_t dim) : fields_(num_fields), dim_(dim) {}
  size_t out_features() const;

  // bottom: B x dim; embeddings: B x num_fields * dim (EmbeddingTables' output).
  const Tensor& forward(const Tensor& bottom, const Tensor& embeddings);
  // dLoss/dOut of the last forward (its inputs must be unchanged) into dLoss/dBottom and
  // dLoss/dEmbeddings.
  void backward(const Tensor& grad_out, Tensor& grad_bottom, Tensor& grad_embeddings);

 private:
  const float* vec(size_t sample, size_t t) const;

  size_t fields_, dim_;
  const Tensor* bottom_ = nullptr;
  const Tensor* embeddings_ = nullptr;
  Tensor out_;
};

}  // namespace frugal::layers
