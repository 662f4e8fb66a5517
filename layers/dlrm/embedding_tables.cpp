#include "layers/dlrm/embedding_tables.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "layers/init.h"

namespace frugal::layers {

EmbeddingTables::EmbeddingTables(std::span<const size_t> rows, size_t dim, uint64_t seed) : dim_(dim) {
  FRUGAL_CHECK(dim > 0, "embedding dimension must be > 0");
  FRUGAL_CHECK(!rows.empty(), "embedding tables: no fields");
  const Rng rng = Rng(seed).split(0xe3b);
  tables_.reserve(rows.size());
  for (size_t f = 0; f < rows.size(); ++f) {
    FRUGAL_CHECK(rows[f] > 0, fmt::format("embedding table of field C{} has no rows", f + 1));
    Parameter p{fmt::format("embedding.C{}", f + 1), Tensor(rows[f], dim), {}, -1, 0, rows[f], dim};
    init_uniform(p.value, rows[f], rng.split(f));
    tables_.push_back(std::move(p));
  }
}

size_t EmbeddingTables::num_parameters() const {
  size_t n = 0;
  for (const Parameter& p : tables_) n += p.value.size();
  return n;
}

std::vector<Parameter*> EmbeddingTables::parameters() {
  std::vector<Parameter*> out;
  for (Parameter& p : tables_) out.push_back(&p);
  return out;
}

const Tensor& EmbeddingTables::forward(std::span<const uint32_t> rows, size_t batch) {
  const size_t fields = tables_.size();
  FRUGAL_CHECK(rows.size() == batch * fields,
               fmt::format("embedding lookup: {} rows for {} samples x {} fields", rows.size(), batch, fields));
  rows_.assign(rows.begin(), rows.end());
  batch_ = batch;
  out_.resize(batch, fields * dim_);
  for (size_t i = 0; i < batch; ++i)
    for (size_t f = 0; f < fields; ++f) {
      const uint32_t r = rows[i * fields + f];
      FRUGAL_CHECK(r < tables_[f].value.rows(), fmt::format("embedding lookup: row {} of field C{}, whose table has {}",
                                                            r, f + 1, tables_[f].value.rows()));
      std::memcpy(out_.row(i) + f * dim_, tables_[f].value.row(r), dim_ * sizeof(float));
    }
  return out_;
}

void EmbeddingTables::backward(const Tensor& grad_out) {
  const size_t fields = tables_.size();
  FRUGAL_CHECK(grad_out.rows() == batch_ && grad_out.cols() == fields * dim_,
               "embedding backward: the gradient's shape is not the last forward's output's");
  for (size_t f = 0; f < fields; ++f) {
    // Samples grouped by row, in sample order within a row: sums run in a fixed order.
    order_.resize(batch_);
    for (size_t i = 0; i < batch_; ++i) order_[i] = {rows_[i * fields + f], static_cast<uint32_t>(i)};
    std::sort(order_.begin(), order_.end());
    RowGrad& g = tables_[f].grad;
    g.rows.clear();
    for (size_t i = 0; i < batch_; ++i)
      if (i == 0 || order_[i].first != order_[i - 1].first) g.rows.push_back(order_[i].first);
    g.values.resize(g.rows.size(), dim_);
    g.values.zero();
    for (size_t i = 0, j = 0; i < batch_; ++i) {
      if (i > 0 && order_[i].first != order_[i - 1].first) ++j;
      float* dst = g.values.row(j);
      const float* src = grad_out.row(order_[i].second) + f * dim_;
      for (size_t c = 0; c < dim_; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace frugal::layers
