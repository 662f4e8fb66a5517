#include "layers/dlrm/embedding_tables.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "layers/init.h"

namespace frugal::layers {

std::vector<EmbeddingField> embedding_fields(const IdMap& ids) {
  std::vector<EmbeddingField> out(ids.num_fields());
  for (size_t f = 0; f < out.size(); ++f) out[f] = {ids.table_rows(f), ids.combine(f)};
  return out;
}

EmbeddingTables::EmbeddingTables(std::span<const EmbeddingField> fields, size_t lookups, size_t dim, uint64_t seed)
    : dim_(dim), lookups_(lookups), fields_(fields.begin(), fields.end()) {
  FRUGAL_CHECK(dim > 0, "embedding dimension must be > 0");
  FRUGAL_CHECK(!fields_.empty(), "embedding tables: no fields");
  FRUGAL_CHECK(lookups_ >= 1, "embedding tables: lookups must be at least 1");
  const Rng rng = Rng(seed).split(0xe3b);
  table_of_.resize(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    const EmbeddingField& field = fields_[f];
    FRUGAL_CHECK(!field.tables.empty() && field.tables.size() <= lookups_,
                 fmt::format("field C{} has {} tables for {} lookups", f + 1, field.tables.size(), lookups_));
    FRUGAL_CHECK(field.combine == Combine::sum || field.tables.size() == 2,
                 fmt::format("field C{}: a product of {} tables (qr multiplies two)", f + 1, field.tables.size()));
    for (size_t s = 0; s < field.tables.size(); ++s) {
      const size_t rows = field.tables[s];
      FRUGAL_CHECK(rows > 0, fmt::format("embedding table {} of field C{} has no rows", s, f + 1));
      const std::string name = s == 0 ? fmt::format("embedding.C{}", f + 1) : fmt::format("embedding.C{}.b", f + 1);
      Parameter p{name, Tensor(rows, dim), {}, -1, 0, rows, dim};
      if (field.combine == Combine::product && s == 0) {
        Rng r = rng.split(f).split(s);
        for (size_t i = 0; i < p.value.size(); ++i) p.value.data()[i] = 1.0f + r.uniform(-0.01f, 0.01f);
      } else {
        init_uniform(p.value, rows, rng.split(f).split(s));
      }
      table_of_[f].push_back(tables_.size());
      tables_.push_back(std::move(p));
    }
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
  const size_t fields = fields_.size();
  FRUGAL_CHECK(rows.size() == batch * fields * lookups_,
               fmt::format("embedding lookup: {} rows for {} samples x {} fields x {} lookups", rows.size(), batch,
                           fields, lookups_));
  rows_.assign(rows.begin(), rows.end());
  batch_ = batch;
  out_.resize(batch, fields * dim_);
  for (size_t i = 0; i < batch; ++i)
    for (size_t f = 0; f < fields; ++f) {
      float* o = out_.row(i) + f * dim_;
      const uint32_t* r = rows.data() + (i * fields + f) * lookups_;
      const bool product = fields_[f].combine == Combine::product;
      bool first = true;
      for (size_t s = 0; s < lookups_; ++s) {
        if (r[s] == kNoRow) continue;
        FRUGAL_CHECK(s < table_of_[f].size(), fmt::format("embedding lookup: field C{} has no table {}", f + 1, s));
        const Parameter& t = tables_[table_of_[f][s]];
        FRUGAL_CHECK(r[s] < t.value.rows(),
                     fmt::format("embedding lookup: row {} of {}, which has {}", r[s], t.name, t.value.rows()));
        const float* v = t.value.row(r[s]);
        if (first) std::memcpy(o, v, dim_ * sizeof(float));
        else if (product) for (size_t c = 0; c < dim_; ++c) o[c] *= v[c];
        else for (size_t c = 0; c < dim_; ++c) o[c] += v[c];
        first = false;
      }
      FRUGAL_CHECK(!first, fmt::format("embedding lookup: sample {} has no row for field C{}", i, f + 1));
    }
  return out_;
}

void EmbeddingTables::table_backward(size_t field, size_t slot, const Tensor& grad_out) {
  const size_t fields = fields_.size();
  const bool product = fields_[field].combine == Combine::product;
  // Samples grouped by row, in sample order within a row: sums run in a fixed order.
  order_.clear();
  for (size_t i = 0; i < batch_; ++i) {
    const uint32_t r = rows_[(i * fields + field) * lookups_ + slot];
    if (r != kNoRow) order_.emplace_back(r, static_cast<uint32_t>(i));
  }
  std::sort(order_.begin(), order_.end());
  RowGrad& g = tables_[table_of_[field][slot]].grad;
  g.rows.clear();
  for (size_t e = 0; e < order_.size(); ++e)
    if (e == 0 || order_[e].first != order_[e - 1].first) g.rows.push_back(order_[e].first);
  g.values.resize(g.rows.size(), dim_);
  g.values.zero();
  for (size_t e = 0, j = 0; e < order_.size(); ++e) {
    if (e > 0 && order_[e].first != order_[e - 1].first) ++j;
    const size_t i = order_[e].second;
    float* dst = g.values.row(j);
    const float* src = grad_out.row(i) + field * dim_;
    if (!product) {
      for (size_t c = 0; c < dim_; ++c) dst[c] += src[c];
      continue;
    }
    // d(a * b)/da = b: times the other slot's row (two slots: qr's quotient and remainder).
    const size_t other = 1 - slot;
    const uint32_t orow = rows_[(i * fields + field) * lookups_ + other];
    const float* ov = tables_[table_of_[field][other]].value.row(orow);
    for (size_t c = 0; c < dim_; ++c) dst[c] += src[c] * ov[c];
  }
}

void EmbeddingTables::backward(const Tensor& grad_out) {
  FRUGAL_CHECK(grad_out.rows() == batch_ && grad_out.cols() == fields_.size() * dim_,
               "embedding backward: the gradient's shape is not the last forward's output's");
  for (size_t f = 0; f < fields_.size(); ++f)
    for (size_t s = 0; s < table_of_[f].size(); ++s) table_backward(f, s, grad_out);
}

}  // namespace frugal::layers
