#include "comm/replica_reducer.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "comm/dct/gradient_exchange.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::comm {

TouchedRowsReducer::TouchedRowsReducer(Communicator& group, std::vector<Parameter*> params, bool dense)
    : group_(group), params_(std::move(params)), dense_(dense) {}

void TouchedRowsReducer::reduce() {
  for (Parameter* p : params_) {
    payload_uncompressed_ += ring_all_reduce_bytes(p->value.size() * sizeof(float), group_.size());
    if (dense_)
      reduce_dense(*p);
    else
      reduce_touched(*p);
  }
}

void TouchedRowsReducer::reduce_dense(Parameter& p) {
  const size_t cols = p.value.cols(), rows = p.value.rows();
  RowGrad& g = p.grad;
  exchange_.resize(rows, cols);
  exchange_.zero();
  for (size_t j = 0; j < g.rows.size(); ++j) std::copy_n(g.values.row(j), cols, exchange_.row(g.rows[j]));
  group_.all_reduce(exchange_.span()).wait();
  payload_sent_ += ring_all_reduce_bytes(exchange_.size() * sizeof(float), group_.size());
  g.rows.resize(rows);
  std::iota(g.rows.begin(), g.rows.end(), 0u);
  g.values = exchange_;
}

void TouchedRowsReducer::reduce_touched(Parameter& p) {
  const size_t cols = p.value.cols();
  RowGrad& g = p.grad;
  // Agree on the union of the touched rows, then sum over it.
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(std::as_bytes(std::span<const uint32_t>(g.rows)), all).wait();
  payload_sent_ += static_cast<uint64_t>(group_.size() - 1) * g.rows.size() * sizeof(uint32_t);
  std::vector<uint32_t> rows_union;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const auto& bytes = all[r];
    FRUGAL_CHECK(bytes.size() % sizeof(uint32_t) == 0,
                 fmt::format("gradient sum of '{}': rank {} sent {} bytes of row ids, not a whole number of them",
                             p.name, r, bytes.size()));
    const size_t n = bytes.size() / sizeof(uint32_t);
    const size_t before = rows_union.size();
    rows_union.resize(before + n);
    std::memcpy(rows_union.data() + before, bytes.data(), n * sizeof(uint32_t));
  }
  std::sort(rows_union.begin(), rows_union.end());
  rows_union.erase(std::unique(rows_union.begin(), rows_union.end()), rows_union.end());
  FRUGAL_CHECK(rows_union.empty() || rows_union.back() < p.value.rows(),
               fmt::format("gradient sum of '{}': a replica touched row {}, the parameter has {} rows", p.name,
                           rows_union.back(), p.value.rows()));
  exchange_.resize(rows_union.size(), cols);
  exchange_.zero();
  for (size_t j = 0, u = 0; j < g.rows.size(); ++j) {
    while (rows_union[u] != g.rows[j]) ++u;
    std::copy_n(g.values.row(j), cols, exchange_.row(u));
  }
  group_.all_reduce(exchange_.span()).wait();
  payload_sent_ += ring_all_reduce_bytes(exchange_.size() * sizeof(float), group_.size());
  g.rows = std::move(rows_union);
  g.values = exchange_;
}

ThresholdedReducer::ThresholdedReducer(Communicator& group, std::vector<Parameter*> params,
                                       const DpCompression& options)
    : group_(group), params_(std::move(params)) {
  for (const KeepOverride& o : options.per_parameter) {  // a prefix that names nothing is a typo, not a no-op
    std::string names;
    bool found = false;
    for (const Parameter* p : params_) {
      found = found || p->name.starts_with(o.prefix);
      names += (names.empty() ? "" : ", ") + p->name;
    }
    FRUGAL_CHECK(found, fmt::format("DpCompression::per_parameter: no parameter's name starts with '{}' (the "
                                    "parameters: {})", o.prefix, names));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    DpCompression o = options;
    o.seed = Rng(o.seed).split(static_cast<uint64_t>(group_.rank())).split(i).next_u64();
    o.keep = options.keep_for(params_[i]->name);
    exchanges_.push_back(std::make_unique<GradientExchange>(o, params_[i]->value.rows(), params_[i]->value.cols(),
                                                            params_[i]->name));
  }
}

ThresholdedReducer::~ThresholdedReducer() = default;

void ThresholdedReducer::reduce() {
  const profile::Scope phase(profile::Phase::compress);  // the collectives' waits are charged to wait
  const int ranks = group_.size();
  const size_t n = params_.size();
  std::vector<float> totals(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const GradientExchange::Totals t = exchanges_[i]->compress(ranks, params_[i]->grad.rows, params_[i]->grad.values);
    totals[2 * i] = t.bytes;
    totals[2 * i + 1] = t.entries;
  }
  if (ranks == 1 || n == 0) return;
  // One all-reduce decides every parameter's path (each is charged its share of it).
  group_.all_reduce(totals).wait();
  for (size_t i = 0; i < n; ++i) exchanges_[i]->count_totals_reduce(2 * sizeof(float), ranks);
  std::vector<size_t> sparse;
  for (size_t i = 0; i < n; ++i) {
    Parameter& p = *params_[i];
    switch (exchanges_[i]->path({totals[2 * i], totals[2 * i + 1]})) {
      case GradientExchange::Path::none: exchanges_[i]->finish_empty(p.grad.rows, p.grad.values); break;
      case GradientExchange::Path::dense: exchanges_[i]->exchange_dense(group_, p.grad.rows, p.grad.values); break;
      case GradientExchange::Path::sparse: sparse.push_back(i); break;
    }
  }
  // The sparse messages travel in as few all-gathers as the 2 GB limit of one allows.
  for (size_t first = 0; first < sparse.size();) {
    size_t last = first + 1;
    double gathered = totals[2 * sparse[first]];
    while (last < sparse.size() && gathered + totals[2 * sparse[last]] <= GradientExchange::kMostGathered)
      gathered += totals[2 * sparse[last++]];
    gather_sparse(std::span<const size_t>(sparse).subspan(first, last - first));
    first = last;
  }
}

void ThresholdedReducer::gather_sparse(std::span<const size_t> which) {
  // One frame: each parameter's message, preceded by its length (u64, little-endian).
  frame_.clear();
  for (const size_t i : which) {
    const std::span<const std::byte> m = exchanges_[i]->message();
    const uint64_t len = m.size();
    const auto* b = reinterpret_cast<const std::byte*>(&len);
    frame_.insert(frame_.end(), b, b + sizeof len);
    frame_.insert(frame_.end(), m.begin(), m.end());
  }
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(frame_, all).wait();
  // Split every rank's frame back into its messages, checking each length against what is left.
  std::vector<std::vector<std::span<const std::byte>>> parts(which.size(), std::vector<std::span<const std::byte>>(all.size()));
  for (size_t r = 0; r < all.size(); ++r) {
    size_t at = 0;
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t left = all[r].size() - at;
      uint64_t len = 0;
      if (left >= sizeof len) std::memcpy(&len, all[r].data() + at, sizeof len);
      FRUGAL_CHECK(left >= sizeof len && len <= left - sizeof len,
                   fmt::format("DCT-DP: rank {}'s gradient messages end inside the one for '{}' ({} bytes in all; "
                               "truncated, or ranks with other models?)", r, params_[which[k]]->name, all[r].size()));
      parts[k][r] = std::span<const std::byte>(all[r]).subspan(at + sizeof len, len);
      at += sizeof len + len;
    }
    FRUGAL_CHECK(at == all[r].size(), fmt::format("DCT-DP: rank {} sent {} bytes of gradient messages, {} more than its "
                                                  "{} parameters' (ranks with other models?)", r, all[r].size(),
                                                  all[r].size() - at, which.size()));
  }
  for (size_t k = 0; k < which.size(); ++k) {
    Parameter& p = *params_[which[k]];
    exchanges_[which[k]]->count_gather(sizeof(uint64_t) + exchanges_[which[k]]->message().size(), group_.size());
    exchanges_[which[k]]->finish_sparse(parts[k], p.grad.rows, p.grad.values);
  }
}

uint64_t ThresholdedReducer::payload_sent() const {
  uint64_t total = 0;
  for (const auto& e : exchanges_) total += e->payload_sent();
  return total;
}

uint64_t ThresholdedReducer::payload_touched() const {
  uint64_t total = 0;
  for (const auto& e : exchanges_) total += e->payload_touched();
  return total;
}

uint64_t ThresholdedReducer::payload_uncompressed() const {
  uint64_t total = 0;
  for (const auto& e : exchanges_) total += e->payload_uncompressed();
  return total;
}

size_t ThresholdedReducer::feedback_size(size_t param) const {
  return exchanges_.at(param)->thresholder().residual().size();
}

ThresholderState ThresholdedReducer::feedback_state(size_t param) const {
  return exchanges_.at(param)->thresholder().state();
}

void ThresholdedReducer::restore_feedback(size_t param, const ThresholderState& state) {
  exchanges_.at(param)->thresholder().restore(state);
}

std::unique_ptr<ReplicaReducer> make_replica_reducer(Communicator& group, std::vector<Parameter*> params,
                                                     const ReducerOptions& options) {
  switch (options.mode) {
    case ReduceMode::thresholded:
      return std::make_unique<ThresholdedReducer>(group, std::move(params), options.dp);
    case ReduceMode::dense:
      return std::make_unique<TouchedRowsReducer>(group, std::move(params), true);
    case ReduceMode::touched_rows:
      break;
  }
  return std::make_unique<TouchedRowsReducer>(group, std::move(params), false);
}

}  // namespace frugal::comm
