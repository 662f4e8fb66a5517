#include "layers/dlrm/ps_exchange.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/placement.h"

namespace frugal::layers {
namespace {

// Point-to-point tags of the three messages of a step (distinct from the trainer's other traffic).
constexpr int kTagPull = 0x5e01, kTagRows = 0x5e02, kTagPush = 0x5e03;

template <class T>
void append(std::vector<std::byte>& out, const T* data, size_t n) {
  const size_t at = out.size();
  out.resize(at + n * sizeof(T));
  if (n > 0) std::memcpy(out.data() + at, data, n * sizeof(T));
}

// Reads n values of T at `at` of `in`, checking the length (a message from another rank).
template <class T>
void take(const std::vector<std::byte>& in, size_t& at, T* out, size_t n, int from, const char* what) {
  FRUGAL_CHECK(at + n * sizeof(T) <= in.size(),
               fmt::format("PS exchange: rank {}'s {} message is {} bytes, shorter than its contents", from, what,
                           in.size()));
  if (n > 0) std::memcpy(out, in.data() + at, n * sizeof(T));
  at += n * sizeof(T);
}

}  // namespace

PsExchange::PsExchange(comm::Communicator& group, EmbeddingTables& tables) : group_(group), tables_(tables) {
  for (size_t f = 0; f < tables_.num_fields(); ++f)
    for (size_t s = 0; s < tables_.tables_of(f); ++s) {
      Table t;
      t.field = f;
      t.slot = s;
      t.bounds = slice_bounds(tables_.table(f, s).full_rows, static_cast<size_t>(group_.size()));
      FRUGAL_CHECK(t.bounds[static_cast<size_t>(group_.rank())] == tables_.table(f, s).offset,
                   "PS exchange: the tables are not sliced over this group");
      tables_info_.push_back(std::move(t));
    }
}

int PsExchange::owner(const Table& t, uint32_t row) const {
  return static_cast<int>(std::upper_bound(t.bounds.begin(), t.bounds.end(), row) - t.bounds.begin()) - 1;
}

const Tensor& PsExchange::forward(std::span<const uint32_t> rows, size_t n) {
  const size_t fields = tables_.num_fields(), lookups = tables_.lookups(), dim = tables_.dim();
  const int me = group_.rank(), ranks = group_.size();
  FRUGAL_CHECK(rows.size() == n * fields * lookups, "PS exchange: the rows do not match the batch");
  total_ = group_count(group_, n);
  rows_.assign(rows.begin(), rows.end());
  n_ = n;
  // The rows this rank's samples use, per table; a pull request per owner.
  std::vector<std::vector<std::byte>> requests(static_cast<size_t>(ranks));
  for (Table& t : tables_info_) {
    t.used.clear();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rows[(i * fields + t.field) * lookups + t.slot];
      if (r != kNoRow) t.used.push_back(r);
    }
    std::sort(t.used.begin(), t.used.end());
    t.used.erase(std::unique(t.used.begin(), t.used.end()), t.used.end());
    FRUGAL_CHECK(t.used.empty() || t.used.back() < t.bounds.back(),
                 fmt::format("PS exchange: row {} of a table of {} rows", t.used.empty() ? 0 : t.used.back(),
                             t.bounds.back()));
    for (int o = 0; o < ranks; ++o) {
      const auto first = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o]));
      const auto last = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o + 1]));
      const auto count = static_cast<uint32_t>(last - first);
      append(requests[static_cast<size_t>(o)], &count, 1);
      append(requests[static_cast<size_t>(o)], t.used.data() + (first - t.used.begin()), count);  // no *end()
    }
  }
  for (int o = 0; o < ranks; ++o)
    if (o != me) group_.send(o, kTagPull, requests[static_cast<size_t>(o)]).wait();
  // Serve the others' pulls: the requested rows of every table, in their order.
  for (Table& t : tables_info_) t.requested.assign(static_cast<size_t>(ranks), {});
  for (int o = 0; o < ranks; ++o) {
    if (o == me) continue;
    std::vector<std::byte> in;
    group_.recv(o, kTagPull, in).wait();
    std::vector<std::byte> reply;
    size_t at = 0;
    for (Table& t : tables_info_) {
      uint32_t count = 0;
      take(in, at, &count, 1, o, "pull");
      std::vector<uint32_t>& req = t.requested[static_cast<size_t>(o)];
      req.resize(count);
      take(in, at, req.data(), count, o, "pull");
      const Parameter& p = tables_.table(t.field, t.slot);
      for (uint32_t r : req) {
        FRUGAL_CHECK(r >= p.offset && r < p.offset + p.value.rows(),
                     fmt::format("PS exchange: rank {} pulled row {} of {}, which rank {} does not own", o, r, p.name,
                                 me));
        append(reply, p.value.row(r - p.offset), dim);
      }
    }
    FRUGAL_CHECK(at == in.size(), fmt::format("PS exchange: rank {}'s pull has {} bytes too many", o, in.size() - at));
    group_.send(o, kTagRows, reply).wait();
  }
  // The rows themselves: own ones copied, the others from their owners' replies.
  for (Table& t : tables_info_) {
    t.values.resize(t.used.size(), dim);
    const Parameter& p = tables_.table(t.field, t.slot);
    for (size_t j = 0; j < t.used.size(); ++j)
      if (owner(t, t.used[j]) == me) std::memcpy(t.values.row(j), p.value.row(t.used[j] - p.offset), dim * sizeof(float));
  }
  for (int o = 0; o < ranks; ++o) {
    if (o == me) continue;
    std::vector<std::byte> in;
    group_.recv(o, kTagRows, in).wait();
    size_t at = 0;
    for (Table& t : tables_info_) {
      const auto first = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o]));
      const auto last = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o + 1]));
      for (auto it = first; it != last; ++it)
        take(in, at, t.values.row(static_cast<size_t>(it - t.used.begin())), dim, o, "rows");
    }
    FRUGAL_CHECK(at == in.size(), fmt::format("PS exchange: rank {}'s rows are {} bytes too many", o, in.size() - at));
  }
  // This rank's samples' slots, then their field vectors.
  slots_.resize(n, tables_.slot_width());
  slots_.zero();
  for (const Table& t : tables_info_)
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rows[(i * fields + t.field) * lookups + t.slot];
      if (r == kNoRow) continue;
      const size_t j = static_cast<size_t>(std::lower_bound(t.used.begin(), t.used.end(), r) - t.used.begin());
      std::memcpy(slots_.row(i) + (t.field * lookups + t.slot) * dim, t.values.row(j), dim * sizeof(float));
    }
  return tables_.combine(rows, slots_);
}

void PsExchange::backward(const Tensor& grad_out) {
  const size_t fields = tables_.num_fields(), lookups = tables_.lookups(), dim = tables_.dim();
  const int me = group_.rank(), ranks = group_.size();
  tables_.combine_backward(grad_out, grad_slots_);
  // Per table, each used row's gradient over this rank's samples (in sample order).
  std::vector<Tensor> grads(tables_info_.size());
  for (size_t k = 0; k < tables_info_.size(); ++k) {
    const Table& t = tables_info_[k];
    grads[k].resize(t.used.size(), dim);
    grads[k].zero();
    for (size_t i = 0; i < n_; ++i) {
      const uint32_t r = rows_[(i * fields + t.field) * lookups + t.slot];
      if (r == kNoRow) continue;
      const size_t j = static_cast<size_t>(std::lower_bound(t.used.begin(), t.used.end(), r) - t.used.begin());
      const float* g = grad_slots_.row(i) + (t.field * lookups + t.slot) * dim;
      float* dst = grads[k].row(j);
      for (size_t c = 0; c < dim; ++c) dst[c] += g[c];
    }
  }
  // Push the others' rows' gradients to their owners (in the order they were pulled).
  for (int o = 0; o < ranks; ++o) {
    if (o == me) continue;
    std::vector<std::byte> push;
    for (size_t k = 0; k < tables_info_.size(); ++k) {
      const Table& t = tables_info_[k];
      const auto first = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o]));
      const auto last = std::lower_bound(t.used.begin(), t.used.end(), static_cast<uint32_t>(t.bounds[o + 1]));
      for (auto it = first; it != last; ++it) append(push, grads[k].row(static_cast<size_t>(it - t.used.begin())), dim);
    }
    group_.send(o, kTagPush, push).wait();
  }
  // Owned rows: every rank's pushes (this rank's own at its turn), summed in rank order.
  std::vector<std::vector<std::byte>> pushes(static_cast<size_t>(ranks));
  for (int o = 0; o < ranks; ++o)
    if (o != me) group_.recv(o, kTagPush, pushes[static_cast<size_t>(o)]).wait();
  std::vector<size_t> at(static_cast<size_t>(ranks), 0);
  for (size_t k = 0; k < tables_info_.size(); ++k) {
    Table& t = tables_info_[k];
    Parameter& p = tables_.table(t.field, t.slot);
    // The rows some rank used here: the union of the pulls and this rank's own.
    std::vector<uint32_t> owned;
    for (int o = 0; o < ranks; ++o) {
      if (o == me) {
        for (uint32_t r : t.used)
          if (owner(t, r) == me) owned.push_back(r);
      } else {
        owned.insert(owned.end(), t.requested[static_cast<size_t>(o)].begin(), t.requested[static_cast<size_t>(o)].end());
      }
    }
    std::sort(owned.begin(), owned.end());
    owned.erase(std::unique(owned.begin(), owned.end()), owned.end());
    Tensor acc(owned.size(), dim);
    const auto add = [&](uint32_t r, const float* g) {
      float* dst = acc.row(static_cast<size_t>(std::lower_bound(owned.begin(), owned.end(), r) - owned.begin()));
      for (size_t c = 0; c < dim; ++c) dst[c] += g[c];
    };
    std::vector<float> row(dim);
    for (int o = 0; o < ranks; ++o) {
      if (o == me) {
        for (size_t j = 0; j < t.used.size(); ++j)
          if (owner(t, t.used[j]) == me) add(t.used[j], grads[k].row(j));
        continue;
      }
      for (uint32_t r : t.requested[static_cast<size_t>(o)]) {
        take(pushes[static_cast<size_t>(o)], at[static_cast<size_t>(o)], row.data(), dim, o, "push");
        add(r, row.data());
      }
    }
    p.grad.rows.resize(owned.size());
    for (size_t j = 0; j < owned.size(); ++j) p.grad.rows[j] = static_cast<uint32_t>(owned[j] - p.offset);
    p.grad.values = std::move(acc);
  }
  for (int o = 0; o < ranks; ++o)
    FRUGAL_CHECK(o == me || at[static_cast<size_t>(o)] == pushes[static_cast<size_t>(o)].size(),
                 fmt::format("PS exchange: rank {}'s push has {} bytes too many", o,
                             pushes[static_cast<size_t>(o)].size() - at[static_cast<size_t>(o)]));
}

}  // namespace frugal::layers
