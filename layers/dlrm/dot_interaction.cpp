#include "layers/dlrm/dot_interaction.h"

#include <cstring>

#include "core/check.h"

namespace frugal::layers {

size_t DotInteraction::out_features() const {
  const size_t t = fields_ + 1;
  return dim_ + t * (t - 1) / 2;
}

const float* DotInteraction::vec(size_t sample, size_t t) const {
  return t == 0 ? bottom_->row(sample) : embeddings_->row(sample) + (t - 1) * dim_;
}

const Tensor& DotInteraction::forward(const Tensor& bottom, const Tensor& embeddings) {
  const size_t b = bottom.rows(), t = fields_ + 1;
  FRUGAL_CHECK(bottom.cols() == dim_ && embeddings.rows() == b && embeddings.cols() == fields_ * dim_,
               "DotInteraction: the bottom output and the embeddings do not have the interaction's shape");
  bottom_ = &bottom;
  embeddings_ = &embeddings;
  out_.resize(b, out_features());
  for (size_t s = 0; s < b; ++s) {
    float* o = out_.row(s);
    std::memcpy(o, bottom.row(s), dim_ * sizeof(float));
    size_t k = dim_;
    for (size_t i = 1; i < t; ++i) {
      const float* vi = vec(s, i);
      for (size_t j = 0; j < i; ++j) {
        const float* vj = vec(s, j);
        float dot = 0;
        for (size_t c = 0; c < dim_; ++c) dot += vi[c] * vj[c];
        o[k++] = dot;
      }
    }
  }
  return out_;
}

void DotInteraction::backward(const Tensor& grad_out, Tensor& grad_bottom, Tensor& grad_embeddings) {
  FRUGAL_CHECK(bottom_ != nullptr, "DotInteraction::backward before forward");
  const size_t b = bottom_->rows(), t = fields_ + 1;
  FRUGAL_CHECK(grad_out.rows() == b && grad_out.cols() == out_features(),
               "DotInteraction::backward: the gradient's shape is not the last output's");
  grad_bottom.resize(b, dim_);
  grad_embeddings.resize(b, fields_ * dim_);
  for (size_t s = 0; s < b; ++s) {
    const float* g = grad_out.row(s);
    float* gb = grad_bottom.row(s);
    float* ge = grad_embeddings.row(s);
    std::memcpy(gb, g, dim_ * sizeof(float));
    std::memset(ge, 0, fields_ * dim_ * sizeof(float));
    const auto grad_of = [&](size_t i) { return i == 0 ? gb : ge + (i - 1) * dim_; };
    size_t k = dim_;
    for (size_t i = 1; i < t; ++i) {
      const float* vi = vec(s, i);
      float* gi = grad_of(i);
      for (size_t j = 0; j < i; ++j) {
        const float gij = g[k++];
        if (gij == 0.0f) continue;
        const float* vj = vec(s, j);
        float* gj = grad_of(j);
        for (size_t c = 0; c < dim_; ++c) {
          gi[c] += gij * vj[c];
          gj[c] += gij * vi[c];
        }
      }
    }
  }
}

}  // namespace frugal::layers
