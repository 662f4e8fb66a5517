#include "comm/dct/gradient_exchange.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::comm {

namespace {

// rows * cols, checked before the thresholder allocates a residual of that many floats.
size_t checked_entries(const DpCompression& options, size_t rows, size_t cols, const std::string& name) {
  options.validate();
  // An empty parameter (the slice of a rank left out, on every replica alike) sends nothing.
  if (rows == 0 || cols == 0) return 0;
  // The codec carries a dimension and flat indices of at most 2^32-1.
  FRUGAL_CHECK(static_cast<uint64_t>(rows) * cols <= std::numeric_limits<uint32_t>::max(),
               fmt::format("gradient exchange of '{}': {} x {} entries exceed the 2^32-1 a compressed "
                           "exchange can index", name, rows, cols));
  return rows * cols;
}
}  // namespace

GradientExchange::GradientExchange(const DpCompression& options, size_t rows, size_t cols, std::string name)
    : options_(options), rows_(rows), cols_(cols), name_(std::move(name)),
      thresholder_({.keep = options.keep, .reestimate_every = options.reestimate_every,
                    .exact = options.exact_tau, .sample_size = options.sample_size, .seed = options.seed,
                    .warmup_steps = options.warmup_steps, .per_row = options.per_row,
                    .row_floor = options.row_floor,
                    .momentum = options.momentum, .momentum_scale = options.momentum_scale,
                    .auto_energy = options.auto_energy, .explore = options.explore},
                   checked_entries(options, rows, cols, name_)) {}

void GradientExchange::exchange(Communicator& group, std::vector<uint32_t>& rows, Tensor& values) {
  const Totals mine = compress(group.size(), rows, values);
  if (group.size() == 1) return;
  float totals[2] = {mine.bytes, mine.entries};
  group.all_reduce(totals).wait();
  count_totals_reduce(sizeof(totals), group.size());
  switch (path({totals[0], totals[1]})) {
    case Path::none: return finish_empty(rows, values);
    case Path::dense: return exchange_dense(group, rows, values);
    case Path::sparse: break;
  }
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(message_, all).wait();
  count_gather(message_.size(), group.size());
  std::vector<std::span<const std::byte>> parts(all.begin(), all.end());
  finish_sparse(parts, rows, values);
}

GradientExchange::Totals GradientExchange::compress(int ranks, std::vector<uint32_t>& rows, Tensor& values) {
  FRUGAL_CHECK(values.rows() == rows.size() && (rows.empty() || values.cols() == cols_),
               fmt::format("gradient exchange of '{}': {} rows but a {} x {} gradient (expected {} "
                           "columns)", name_, rows.size(), values.rows(), values.cols(), cols_));
  const uint64_t dim = static_cast<uint64_t>(rows_) * cols_;
  if (dim == 0) {  // an empty slice: its gradient rows carry no entries, and nothing travels
    ++exchanges_;
    rows.clear();
    values.resize(0, cols_);
    message_.clear();
    return {};
  }
  if (ranks > 1) payload_touched_ += ring_all_reduce_bytes(rows.size() * cols_ * sizeof(float), ranks);
  thresholder_.compress_rows(cols_, rows, values.data(), options_.wire, indices_, sent_);
  ++exchanges_;
  payload_uncompressed_ += ring_all_reduce_bytes(dim * sizeof(float), ranks);
  if (ranks == 1) {  // nobody to talk to: the sum is what this rank sent
    to_rows(indices_, sent_, rows, values);
    message_.clear();
    return {};
  }
  encode_sparse(dim, indices_, sent_, options_.wire, message_);
  return {static_cast<float>(message_.size()), static_cast<float>(indices_.size())};
}

GradientExchange::Path GradientExchange::path(const Totals& summed) const {
  if (summed.entries == 0.0f) return Path::none;  // nobody sent anything (all below a stale tau)
  // Over all ranks, the all-gather sends (P-1) * (all messages) and a ring all-reduce of the dense
  // parameter 2 * (P-1) * dim * 4 bytes: the sparse path wins while all messages together stay
  // under 2 * dim * 4 bytes. (MPI's all_gather_bytes also cannot move more than 2 GB in all.)
  const double dense_cost = 2.0 * static_cast<double>(rows_) * static_cast<double>(cols_) * sizeof(float);
  return static_cast<double>(summed.bytes) > std::min(dense_cost, kMostGathered) ? Path::dense : Path::sparse;
}

void GradientExchange::finish_empty(std::vector<uint32_t>& rows, Tensor& values) const {
  rows.clear();
  values.resize(0, cols_);
}

void GradientExchange::count_totals_reduce(size_t bytes, int ranks) { payload_sent_ += ring_all_reduce_bytes(bytes, ranks); }

void GradientExchange::count_gather(size_t bytes, int ranks) {
  payload_sent_ += static_cast<uint64_t>(bytes) * static_cast<uint64_t>(ranks - 1);
}

void GradientExchange::exchange_dense(Communicator& group, std::vector<uint32_t>& rows, Tensor& values) {
  ++dense_fallbacks_;
  const size_t dim = rows_ * cols_;
  // The dense parameter, then one flag per row: > 0 after the sum where any rank sent an entry of
  // that row (so rows in which only zeros were sent, with keep = 1, still count as sent).
  dense_.assign(dim + rows_, 0.0f);
  for (size_t k = 0; k < indices_.size(); ++k) {
    dense_[indices_[k]] = sent_[k];
    dense_[dim + indices_[k] / cols_] = 1.0f;
  }
  group.all_reduce(dense_).wait();
  payload_sent_ += ring_all_reduce_bytes(dense_.size() * sizeof(float), group.size());

  rows.clear();
  for (size_t r = 0; r < rows_; ++r)
    if (dense_[dim + r] > 0.0f) rows.push_back(static_cast<uint32_t>(r));
  values.resize(rows.size(), cols_);
  for (size_t k = 0; k < rows.size(); ++k)
    std::memcpy(values.row(k), dense_.data() + static_cast<size_t>(rows[k]) * cols_, cols_ * sizeof(float));
}

void GradientExchange::finish_sparse(std::span<const std::span<const std::byte>> all,
                                     std::vector<uint32_t>& rows, Tensor& values) {
  // Every rank decodes the same messages (its own included, which round-trips exactly: sent
  // values are already rounded to the wire type), so every rank merges the same numbers.
  // The buffers are the exchange's, reused: a step allocates (and page-faults) nothing once warm.
  std::vector<SparseVector>& parts = parts_;
  parts.resize(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    try {
      const EncodedInfo info = peek(all[r]);
      if (info.dim != static_cast<uint64_t>(rows_) * cols_ || info.type != options_.wire) {
        throw CodecError(fmt::format("message for {} entries of value type {}, expected {} entries of "
                                     "type {} (ranks configured differently?)", info.dim,
                                     static_cast<int>(info.type), rows_ * cols_,
                                     static_cast<int>(options_.wire)));
      }
      decode(all[r], parts[r]);
    } catch (const CodecError& e) {
      throw CodecError(fmt::format("gradient exchange of '{}' ({} x {}): bad message from rank {}: {}",
                                   name_, rows_, cols_, r, e.what()));
    }
  }

  // Pairwise merges by index in rank order: rank 0's entries, then rank 1's merged in, and so on.
  // Each sum starts with the lowest rank's value and adds the others in rank order, the same float
  // operations on every rank; each merge is linear in the entries so far (a heap over the ranks
  // cost a log factor and a branchy pop per entry).
  std::vector<uint32_t>& indices = merged_indices_[0];
  std::vector<float>& sums = merged_sums_[0];
  std::vector<uint32_t>& merged_indices = merged_indices_[1];
  std::vector<float>& merged_sums = merged_sums_[1];
  indices.assign(parts[0].indices.begin(), parts[0].indices.end());
  sums.assign(parts[0].values.begin(), parts[0].values.end());
  for (size_t r = 1; r < parts.size(); ++r) {
    const auto& next_i = parts[r].indices;
    const auto& next_v = parts[r].values;
    // Written through pointers into room for both (no push_back's capacity check an entry), then
    // trimmed to what the merge produced.
    merged_indices.resize(indices.size() + next_i.size());
    merged_sums.resize(indices.size() + next_i.size());
    uint32_t* out_i = merged_indices.data();
    float* out_v = merged_sums.data();
    size_t a = 0, b = 0;
    while (a < indices.size() && b < next_i.size()) {
      if (indices[a] < next_i[b]) {
        *out_i++ = indices[a];
        *out_v++ = sums[a++];
      } else if (next_i[b] < indices[a]) {
        *out_i++ = next_i[b];
        *out_v++ = next_v[b++];
      } else {
        *out_i++ = indices[a];
        *out_v++ = sums[a++] + next_v[b++];
      }
    }
    out_i = std::copy(indices.begin() + static_cast<std::ptrdiff_t>(a), indices.end(), out_i);
    out_v = std::copy(sums.begin() + static_cast<std::ptrdiff_t>(a), sums.end(), out_v);
    out_i = std::copy(next_i.begin() + static_cast<std::ptrdiff_t>(b), next_i.end(), out_i);
    out_v = std::copy(next_v.begin() + static_cast<std::ptrdiff_t>(b), next_v.end(), out_v);
    merged_indices.resize(static_cast<size_t>(out_i - merged_indices.data()));
    merged_sums.resize(static_cast<size_t>(out_v - merged_sums.data()));
    indices.swap(merged_indices);
    sums.swap(merged_sums);
  }
  to_rows(indices, sums, rows, values);
}

void GradientExchange::to_rows(std::span<const uint32_t> indices, std::span<const float> sums,
                               std::vector<uint32_t>& rows, Tensor& values) const {
  // The indices ascend, so a row's entries are consecutive: one division a row, not an entry.
  rows.clear();
  size_t row_end = 0;  // the flat index just past the current row
  for (const uint32_t i : indices) {
    if (i < row_end) continue;
    const size_t row = i / cols_;
    rows.push_back(static_cast<uint32_t>(row));
    row_end = (row + 1) * cols_;
  }
  // Only the output rows are zeroed: O(touched rows x cols), never O(parameter).
  values.resize(rows.size(), cols_);
  values.zero();
  float* out = nullptr;
  size_t row_begin = 0, k = 0;
  row_end = 0;
  for (size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] >= row_end) {
      out = values.row(k);
      row_begin = static_cast<size_t>(rows[k++]) * cols_;
      row_end = row_begin + cols_;
    }
    out[indices[j] - row_begin] = sums[j];
  }
}

}  // namespace frugal::comm
