#include "layers/dlrm/embedding_tables.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/placement.h"
#include "core/rng.h"
#include "layers/init.h"

namespace frugal::layers {

std::vector<EmbeddingField> embedding_fields(const IdMap& ids) {
  std::vector<EmbeddingField> out(ids.num_fields());
  for (size_t f = 0; f < out.size(); ++f) out[f] = {ids.table_rows(f), ids.combine(f)};
  return out;
}

EmbeddingTables::EmbeddingTables(std::span<const EmbeddingField> fields, size_t lookups, size_t dim, uint64_t seed,
                                 int rank, int ranks)
    : dim_(dim), lookups_(lookups), fields_(fields.begin(), fields.end()) {
  FRUGAL_CHECK(dim > 0, "embedding dimension must be > 0");
  FRUGAL_CHECK(!fields_.empty(), "embedding tables: no fields");
  FRUGAL_CHECK(lookups_ >= 1, "embedding tables: lookups must be at least 1");
  FRUGAL_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, fmt::format("embedding tables: rank {} of {}", rank, ranks));
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
      const std::vector<size_t> bounds = slice_bounds(rows, static_cast<size_t>(ranks));
      const size_t begin = bounds[static_cast<size_t>(rank)], end = bounds[static_cast<size_t>(rank) + 1];
      const std::string name = s == 0 ? fmt::format("embedding.C{}", f + 1) : fmt::format("embedding.C{}.b", f + 1);
      Parameter p{name, Tensor(end - begin, dim), {}, ranks > 1 ? 0 : -1, begin, rows, dim};
      p.row_sparse = true;  // a batch touches its ids' rows: row-wise optimizers keep one value per row
      p.input_rows = true;
      const Rng table_rng = rng.split(f).split(s);
      if (field.combine == Combine::product && s == 0) {
        for (size_t r = 0; r < end - begin; ++r) {
          Rng stream = table_rng.split(begin + r);
          for (size_t c = 0; c < dim; ++c) p.value.row(r)[c] = 1.0f + stream.uniform(-0.01f, 0.01f);
        }
      } else {
        init_uniform(p.value, rows, table_rng, begin);
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

void EmbeddingTables::check_rows(std::span<const uint32_t> rows, size_t n) const {
  const size_t fields = fields_.size();
  FRUGAL_CHECK(rows.size() == n * fields * lookups_,
               fmt::format("embedding lookup: {} rows for {} samples x {} fields x {} lookups", rows.size(), n, fields,
                           lookups_));
  for (size_t i = 0; i < n; ++i)
    for (size_t f = 0; f < fields; ++f) {
      const uint32_t* r = rows.data() + (i * fields + f) * lookups_;
      bool any = false;
      for (size_t s = 0; s < lookups_; ++s) {
        if (r[s] == kNoRow) continue;
        FRUGAL_CHECK(s < table_of_[f].size(), fmt::format("embedding lookup: field C{} has no table {}", f + 1, s));
        FRUGAL_CHECK(r[s] < table(f, s).full_rows, fmt::format("embedding lookup: row {} of {}, which has {}", r[s],
                                                               table(f, s).name, table(f, s).full_rows));
        any = true;
      }
      FRUGAL_CHECK(any, fmt::format("embedding lookup: sample {} has no row for field C{}", i, f + 1));
      FRUGAL_CHECK(fields_[f].combine == Combine::sum || (r[0] != kNoRow && r[1] != kNoRow),
                   fmt::format("embedding lookup: sample {}'s field C{} multiplies two rows but has one", i, f + 1));
    }
}

void EmbeddingTables::gather_owned(std::span<const uint32_t> rows, size_t n, Tensor& slots) const {
  check_rows(rows, n);
  const size_t fields = fields_.size();
  slots.resize(n, slot_width());
  slots.zero();
  for (size_t i = 0; i < n; ++i)
    for (size_t f = 0; f < fields; ++f)
      for (size_t s = 0; s < table_of_[f].size(); ++s) {
        const uint32_t r = rows[(i * fields + f) * lookups_ + s];
        const Parameter& t = table(f, s);
        if (r == kNoRow || r < t.offset || r >= t.offset + t.value.rows()) continue;
        std::memcpy(slots.row(i) + (f * lookups_ + s) * dim_, t.value.row(r - t.offset), dim_ * sizeof(float));
      }
}

const Tensor& EmbeddingTables::combine(std::span<const uint32_t> rows, const Tensor& slots) {
  const size_t fields = fields_.size(), n = slots.rows();
  FRUGAL_CHECK(slots.cols() == slot_width() && rows.size() == n * fields * lookups_,
               "embedding combine: the slots or rows do not match the tables");
  rows_.assign(rows.begin(), rows.end());
  slots_ = &slots;
  out_.resize(n, fields * dim_);
  for (size_t i = 0; i < n; ++i)
    for (size_t f = 0; f < fields; ++f) {
      float* o = out_.row(i) + f * dim_;
      const uint32_t* r = rows.data() + (i * fields + f) * lookups_;
      const float* slot = slots.row(i) + f * lookups_ * dim_;
      if (fields_[f].combine == Combine::product) {
        for (size_t c = 0; c < dim_; ++c) o[c] = slot[c] * slot[dim_ + c];
        continue;
      }
      std::memset(o, 0, dim_ * sizeof(float));
      for (size_t s = 0; s < lookups_; ++s)
        if (r[s] != kNoRow)
          for (size_t c = 0; c < dim_; ++c) o[c] += slot[s * dim_ + c];
    }
  return out_;
}

void EmbeddingTables::combine_backward(const Tensor& grad_out, Tensor& grad_slots) const {
  const size_t fields = fields_.size();
  FRUGAL_CHECK(slots_ != nullptr && grad_out.rows() == slots_->rows() && grad_out.cols() == fields * dim_,
               "embedding combine_backward: the gradient's shape is not the last combine's output's");
  const size_t n = grad_out.rows();
  grad_slots.resize(n, slot_width());
  grad_slots.zero();
  for (size_t i = 0; i < n; ++i)
    for (size_t f = 0; f < fields; ++f) {
      const float* g = grad_out.row(i) + f * dim_;
      float* gs = grad_slots.row(i) + f * lookups_ * dim_;
      const uint32_t* r = rows_.data() + (i * fields + f) * lookups_;
      if (fields_[f].combine == Combine::product) {
        const float* slot = slots_->row(i) + f * lookups_ * dim_;
        for (size_t c = 0; c < dim_; ++c) {
          gs[c] = g[c] * slot[dim_ + c];  // d(a * b)/da = b
          gs[dim_ + c] = g[c] * slot[c];
        }
        continue;
      }
      for (size_t s = 0; s < lookups_; ++s)
        if (r[s] != kNoRow) std::memcpy(gs + s * dim_, g, dim_ * sizeof(float));
    }
}

void EmbeddingTables::accumulate(std::span<const uint32_t> rows, size_t n, const Tensor& grad_slots) {
  const size_t fields = fields_.size();
  FRUGAL_CHECK(rows.size() == n * fields * lookups_ && grad_slots.rows() == n && grad_slots.cols() == slot_width(),
               "embedding accumulate: the rows or slot gradients do not match the tables");
  for (size_t f = 0; f < fields; ++f)
    for (size_t s = 0; s < table_of_[f].size(); ++s) {
      Parameter& t = tables_[table_of_[f][s]];
      // Samples grouped by (owned) row, in sample order within a row: sums run in a fixed order.
      order_.clear();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t r = rows[(i * fields + f) * lookups_ + s];
        if (r != kNoRow && r >= t.offset && r < t.offset + t.value.rows())
          order_.emplace_back(static_cast<uint32_t>(r - t.offset), static_cast<uint32_t>(i));
      }
      std::sort(order_.begin(), order_.end());
      RowGrad& g = t.grad;
      g.rows.clear();
      for (size_t e = 0; e < order_.size(); ++e)
        if (e == 0 || order_[e].first != order_[e - 1].first) g.rows.push_back(order_[e].first);
      g.values.resize(g.rows.size(), dim_);
      g.values.zero();
      for (size_t e = 0, j = 0; e < order_.size(); ++e) {
        if (e > 0 && order_[e].first != order_[e - 1].first) ++j;
        float* dst = g.values.row(j);
        const float* src = grad_slots.row(order_[e].second) + (f * lookups_ + s) * dim_;
        for (size_t c = 0; c < dim_; ++c) dst[c] += src[c];
      }
    }
}

const Tensor& EmbeddingTables::forward(std::span<const uint32_t> rows, size_t batch) {
  gather_owned(rows, batch, own_slots_);
  return combine(rows, own_slots_);
}

void EmbeddingTables::backward(const Tensor& grad_out) {
  combine_backward(grad_out, grad_slots_);
  accumulate(rows_, grad_slots_.rows(), grad_slots_);
}

}  // namespace frugal::layers
