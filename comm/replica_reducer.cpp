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
  for (Parameter* p : params_)
    payload_uncompressed_ += ring_all_reduce_bytes(p->value.size() * sizeof(float), group_.size());
  if (dense_) {
    for (Parameter* p : params_) reduce_dense(*p);
  } else {
    reduce_touched();
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

void TouchedRowsReducer::reduce_touched() {
  // 1. Agree on every parameter's union of touched rows: one all-gather of all the row lists, each
  //    preceded by its count (u64).
  frame_.clear();
  for (const Parameter* p : params_) {
    const uint64_t n = p->grad.rows.size();
    const auto* b = reinterpret_cast<const std::byte*>(&n);
    frame_.insert(frame_.end(), b, b + sizeof n);
    const auto rows = std::as_bytes(std::span<const uint32_t>(p->grad.rows));
    frame_.insert(frame_.end(), rows.begin(), rows.end());
  }
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(frame_, all).wait();
  payload_sent_ += static_cast<uint64_t>(group_.size() - 1) * frame_.size();
  unions_.resize(params_.size());
  for (auto& u : unions_) u.clear();
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::vector<std::byte>& bytes = all[r];
    size_t at = 0;
    for (size_t k = 0; k < params_.size(); ++k) {
      uint64_t n = 0;
      const size_t left = bytes.size() - at;
      if (left >= sizeof n) std::memcpy(&n, bytes.data() + at, sizeof n);
      FRUGAL_CHECK(left >= sizeof n && n <= (left - sizeof n) / sizeof(uint32_t),
                   fmt::format("gradient sum of '{}': rank {}'s row ids end early ({} bytes for {} parameters; "
                               "truncated, or ranks with other models?)", params_[k]->name, r, bytes.size(),
                               params_.size()));
      std::vector<uint32_t>& u = unions_[k];
      const size_t before = u.size();
      u.resize(before + n);
      std::memcpy(u.data() + before, bytes.data() + at + sizeof n, n * sizeof(uint32_t));
      at += sizeof n + n * sizeof(uint32_t);
    }
    FRUGAL_CHECK(at == bytes.size(), fmt::format("gradient sum: rank {} sent {} bytes of row ids, {} more than its {} "
                                                 "parameters' (ranks with other models?)", r, bytes.size(),
                                                 bytes.size() - at, params_.size()));
  }
  // 2. Sum over the unions: one all-reduce of every parameter's rows, one after the other.
  size_t total = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    std::vector<uint32_t>& u = unions_[k];
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    FRUGAL_CHECK(u.empty() || u.back() < params_[k]->value.rows(),
                 fmt::format("gradient sum of '{}': a replica touched row {}, the parameter has {} rows",
                             params_[k]->name, u.back(), params_[k]->value.rows()));
    total += u.size() * params_[k]->value.cols();
  }
  sums_.assign(total, 0.0f);
  for (size_t k = 0, at = 0; k < params_.size(); ++k) {
    const RowGrad& g = params_[k]->grad;
    const size_t cols = params_[k]->value.cols();
    const std::vector<uint32_t>& u = unions_[k];
    for (size_t j = 0, i = 0; j < g.rows.size(); ++j) {
      while (u[i] != g.rows[j]) ++i;
      std::copy_n(g.values.row(j), cols, sums_.data() + at + i * cols);
    }
    at += u.size() * cols;
  }
  if (total > 0) {
    group_.all_reduce(sums_).wait();
    payload_sent_ += ring_all_reduce_bytes(total * sizeof(float), group_.size());
  }
  for (size_t k = 0, at = 0; k < params_.size(); ++k) {
    RowGrad& g = params_[k]->grad;
    const size_t cols = params_[k]->value.cols();
    g.rows = unions_[k];
    g.values.resize(g.rows.size(), cols);
    std::copy_n(sums_.data() + at, g.rows.size() * cols, g.values.data());
    at += g.rows.size() * cols;
  }
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
