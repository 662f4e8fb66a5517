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

namespace {

// Several parameters' messages in one buffer, for one collective: each preceded by its length in
// bytes (u64, little-endian).
void append_framed(std::vector<std::byte>& frame, std::span<const std::byte> part) {
  const uint64_t len = part.size();
  const auto* b = reinterpret_cast<const std::byte*>(&len);
  frame.insert(frame.end(), b, b + sizeof len);
  frame.insert(frame.end(), part.begin(), part.end());
}

// Splits a peer's frame back into up to `count` parts, checking each length against what is left.
// Returns whether it held exactly `count` of them; when not, `parts` has those read before the one
// that ran past the end (parts.size() < count) or all of them with bytes left over.
bool split_framed(std::span<const std::byte> frame, size_t count, std::vector<std::span<const std::byte>>& parts) {
  parts.clear();
  size_t at = 0;
  while (parts.size() < count) {
    const size_t left = frame.size() - at;
    uint64_t len = 0;
    if (left < sizeof len) return false;
    std::memcpy(&len, frame.data() + at, sizeof len);
    if (len > left - sizeof len) return false;
    parts.push_back(frame.subspan(at + sizeof len, len));
    at += sizeof len + len;
  }
  return at == frame.size();
}

}  // namespace

TouchedRowsReducer::TouchedRowsReducer(Communicator& group, std::vector<Parameter*> params, bool dense,
                                       bool list_summed_rows)
    : group_(group), params_(std::move(params)), dense_(dense), list_summed_rows_(list_summed_rows) {}

void TouchedRowsReducer::reduce() {
  if (dense_) {
    reduce_dense();
    return;
  }
  for (Parameter* p : params_)
    payload_uncompressed_ += ring_all_reduce_bytes(p->value.size() * sizeof(float), group_.size());
  reduce_touched();
}

void TouchedRowsReducer::reduce_dense() {
  // Every parameter in full, in one buffer: one all-reduce a step (one round trip, not one per
  // parameter), which is also what the baseline sends.
  size_t total = 0;
  for (const Parameter* p : params_) total += p->value.size();
  sums_.assign(total, 0.0f);
  for (size_t k = 0, at = 0; k < params_.size(); ++k) {
    const RowGrad& g = params_[k]->grad;
    const size_t cols = params_[k]->value.cols();
    for (size_t j = 0; j < g.rows.size(); ++j) std::copy_n(g.values.row(j), cols, sums_.data() + at + g.rows[j] * cols);
    at += params_[k]->value.size();
  }
  if (total > 0) group_.all_reduce(sums_).wait();
  const uint64_t bytes = ring_all_reduce_bytes(total * sizeof(float), group_.size());
  payload_sent_ += bytes;
  payload_uncompressed_ += bytes;
  for (size_t k = 0, at = 0; k < params_.size(); ++k) {
    RowGrad& g = params_[k]->grad;
    const size_t cols = params_[k]->value.cols(), rows = params_[k]->value.rows();
    const float* sum = sums_.data() + at;
    g.rows.clear();
    for (size_t r = 0; r < rows; ++r)
      if (!list_summed_rows_ ||
          std::any_of(sum + r * cols, sum + (r + 1) * cols, [](float v) { return v != 0.0f; }))
        g.rows.push_back(static_cast<uint32_t>(r));
    g.values.resize(g.rows.size(), cols);
    for (size_t j = 0; j < g.rows.size(); ++j) std::copy_n(sum + g.rows[j] * cols, cols, g.values.row(j));
    at += params_[k]->value.size();
  }
}

void TouchedRowsReducer::reduce_touched() {
  // 1. Agree on every parameter's union of touched rows: one all-gather of all the row lists.
  frame_.clear();
  for (const Parameter* p : params_) append_framed(frame_, std::as_bytes(std::span<const uint32_t>(p->grad.rows)));
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(frame_, all).wait();
  payload_sent_ += static_cast<uint64_t>(group_.size() - 1) * frame_.size();
  unions_.resize(params_.size());
  for (auto& u : unions_) u.clear();
  std::vector<std::span<const std::byte>> parts;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const bool whole = split_framed(all[r], params_.size(), parts);
    FRUGAL_CHECK(whole || parts.size() == params_.size(),
                 fmt::format("gradient sum of '{}': rank {}'s row ids end early ({} bytes for {} parameters; "
                             "truncated, or ranks with other models?)", params_[std::min(parts.size(), params_.size() - 1)]->name,
                             r, all[r].size(), params_.size()));
    FRUGAL_CHECK(whole, fmt::format("gradient sum: rank {} sent {} bytes of row ids, more than its {} parameters' "
                                    "(ranks with other models?)", r, all[r].size(), params_.size()));
    for (size_t k = 0; k < params_.size(); ++k) {
      FRUGAL_CHECK(parts[k].size() % sizeof(uint32_t) == 0,
                   fmt::format("gradient sum of '{}': rank {} sent {} bytes of row ids, not a whole number of them",
                               params_[k]->name, r, parts[k].size()));
      std::vector<uint32_t>& u = unions_[k];
      const size_t before = u.size();
      u.resize(before + parts[k].size() / sizeof(uint32_t));
      std::memcpy(u.data() + before, parts[k].data(), parts[k].size());
    }
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
  frame_.clear();
  for (const size_t i : which) append_framed(frame_, exchanges_[i]->message());
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(frame_, all).wait();
  // parts[k][r]: parameter which[k]'s message from rank r.
  std::vector<std::vector<std::span<const std::byte>>> parts(which.size(), std::vector<std::span<const std::byte>>(all.size()));
  std::vector<std::span<const std::byte>> of_rank;
  for (size_t r = 0; r < all.size(); ++r) {
    const bool whole = split_framed(all[r], which.size(), of_rank);
    FRUGAL_CHECK(whole || of_rank.size() == which.size(),
                 fmt::format("DCT-DP: rank {}'s gradient messages end inside the one for '{}' ({} bytes in all; "
                             "truncated, or ranks with other models?)", r,
                             params_[which[std::min(of_rank.size(), which.size() - 1)]]->name, all[r].size()));
    FRUGAL_CHECK(whole, fmt::format("DCT-DP: rank {} sent {} bytes of gradient messages, more than its {} parameters' "
                                    "(ranks with other models?)", r, all[r].size(), which.size()));
    for (size_t k = 0; k < which.size(); ++k) parts[k][r] = of_rank[k];
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

ReplicaReducer::AutoKeep ThresholdedReducer::auto_keep(size_t param) const {
  const Thresholder& t = exchanges_.at(param)->thresholder();
  return {.keep = t.keep(), .carried_energy = t.carried_energy(), .backoffs = t.backoffs()};
}

std::unique_ptr<ReplicaReducer> make_replica_reducer(Communicator& group, std::vector<Parameter*> params,
                                                     const ReducerOptions& options) {
  switch (options.mode) {
    case ReduceMode::thresholded:
      return std::make_unique<ThresholdedReducer>(group, std::move(params), options.dp);
    case ReduceMode::dense:
      return std::make_unique<TouchedRowsReducer>(group, std::move(params), true, options.list_summed_rows);
    case ReduceMode::touched_rows:
      break;
  }
  return std::make_unique<TouchedRowsReducer>(group, std::move(params), false);
}

}  // namespace frugal::comm
