#include "comm/replica_reducer.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "comm/dct/gradient_exchange.h"
#include "core/check.h"
#include "core/rng.h"

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
  for (size_t i = 0; i < params_.size(); ++i)
    exchanges_[i]->exchange(group_, params_[i]->grad.rows, params_[i]->grad.values);
}

uint64_t ThresholdedReducer::payload_sent() const {
  uint64_t total = 0;
  for (const auto& e : exchanges_) total += e->payload_sent();
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
