#include "comm/dct/thresholder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "comm/dct/largest.h"
#include "comm/half.h"
#include "core/check.h"

namespace frugal::comm {

namespace {
// The k-th largest of `magnitudes` (1-based k), reordering them.
float kth_largest(std::vector<float>& magnitudes, float keep) {
  if (magnitudes.empty()) return 0.0f;
  const size_t n = magnitudes.size();
  // keep arrives as a float (0.05f is 0.0500000007): shave the representation error so that
  // 5% of 5000 is 250 entries, not 251.
  const auto k = std::clamp<size_t>(static_cast<size_t>(std::ceil(static_cast<double>(keep) * n * (1.0 - 1e-6))), 1, n);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(), std::greater<float>());
  return magnitudes[k - 1];
}
}  // namespace

float exact_threshold(std::span<const float> values, float keep) {
  std::vector<float> m(values.size());
  std::transform(values.begin(), values.end(), m.begin(), [](float v) { return std::abs(v); });
  return kth_largest(m, keep);
}

float sampled_threshold(std::span<const float> values, float keep, size_t samples, Rng& rng) {
  if (values.empty()) return 0.0f;
  std::vector<float> m(samples);
  for (float& x : m) x = std::abs(values[rng.below(values.size())]);
  return kth_largest(m, keep);
}

float round_to_wire(float v, ValueType wire) {
  float r = v;
  float largest = std::numeric_limits<float>::max();
  if (wire == ValueType::f16) {
    r = f16_to_float(float_to_f16(v));
    largest = 65504.0f;
  } else if (wire == ValueType::bf16) {
    r = bf16_to_float(float_to_bf16(v));
    largest = bf16_to_float(0x7f7f);
  }
  if (std::isinf(r) && std::isfinite(v)) r = std::copysign(largest, v);
  return r;
}

Thresholder::Thresholder(const ThresholdOptions& options, size_t size)
    : options_(options), residual_(size, 0.0f), rng_(Rng(options.seed).split(0x7d)) {
  options_.validate();
  if (options_.momentum > 0.0f) velocity_.assign(size, 0.0f);
}

void Thresholder::accumulate(size_t at, const float* g, size_t n) {
  float* residual = residual_.data() + at;
  if (velocity_.empty()) {
    for (size_t i = 0; i < n; ++i) residual[i] += g[i];
    return;
  }
  float* velocity = velocity_.data() + at;
  const float momentum = options_.momentum, scale = options_.momentum_scale;
  for (size_t i = 0; i < n; ++i) {
    velocity[i] = momentum * velocity[i] + scale * g[i];
    residual[i] += velocity[i];
  }
}

namespace {
// Sorts the (index, value) pairs from `begin` on by index: a row's explored entries
// after its top k, or its floor entry after explored ones.
void sort_row_tail(std::vector<uint32_t>& indices, std::vector<float>& values, size_t begin) {
  std::vector<std::pair<uint32_t, float>> row;
  for (size_t i = begin; i < indices.size(); ++i) row.emplace_back(indices[i], values[i]);
  std::sort(row.begin(), row.end());
  for (size_t i = 0; i < row.size(); ++i) {
    indices[begin + i] = row[i].first;
    values[begin + i] = row[i].second;
  }
}

}  // namespace

size_t Thresholder::explore_gap() {
  // 1 + floor(log(U) / log(1 - p)), U uniform in (0, 1]: the trials up to the next success.
  const double u = 1.0 - static_cast<double>(rng_.uniform());
  const double gap = std::floor(std::log(u) / std::log1p(-static_cast<double>(options_.explore)));
  return gap >= 1e18 ? SIZE_MAX / 2 : 1 + static_cast<size_t>(gap);
}

void Thresholder::compress(std::span<const float> gradient, std::vector<uint32_t>& indices, std::vector<float>& values) {
  FRUGAL_CHECK(gradient.size() == residual_.size(),
               fmt::format("threshold: gradient has {} entries, the residual {}", gradient.size(), residual_.size()));
  accumulate(0, gradient.data(), gradient.size());
  const float keep = this->keep();
  if (estimate_due())
    tau_ = options_.exact ? exact_threshold(residual_, keep)
                          : sampled_threshold(residual_, keep, options_.sample_size, rng_);
  ++steps_;
  indices.clear();
  values.clear();
  // The energies only when the automatic keep reads them (they cost a pass's arithmetic otherwise).
  const bool measure = options_.auto_energy > 0.0f;
  double total = 0.0, carried = 0.0;
  size_t explored = first_explored();
  for (size_t i = 0; i < residual_.size(); ++i) {
    const double a = residual_[i];
    if (measure) total += a * a;
    bool take = std::abs(residual_[i]) >= tau_;
    if (i == explored) {  // Slim-DP's exploration: sent whatever its size
      take = true;
      explored += explore_gap();
    }
    if (take && residual_[i] != 0.0f) {
      if (measure) carried += a * a;
      indices.push_back(static_cast<uint32_t>(i));
      values.push_back(residual_[i]);
      residual_[i] = 0.0f;  // sent in full: nothing of it stays behind
      if (!velocity_.empty()) velocity_[i] = 0.0f;  // momentum factor masking
    }
  }
  adapt_keep(total, carried);
}

void Thresholder::adapt_keep(double total, double carried) {
  if (options_.auto_energy <= 0.0f || !(total > 0.0)) return;  // nothing to measure this step
  const double share = std::min(1.0, carried / total);
  carried_energy_ = (1.0 - ThresholdOptions::kAutoSmoothing) * carried_energy_ + ThresholdOptions::kAutoSmoothing * share;
  if (carried_energy_ >= options_.auto_energy) {
    auto_keep_ = std::max(options_.keep, auto_keep_ * ThresholdOptions::kAutoFall);
  } else if (auto_keep_ < 1.0f) {
    auto_keep_ = std::min(1.0f, auto_keep_ * ThresholdOptions::kAutoRise);
    ++backoffs_;
  }
}

void Thresholder::compress_rows(size_t cols, std::span<const uint32_t> rows, const float* values,
                                ValueType wire, std::vector<uint32_t>& indices,
                                std::vector<float>& sent) {
  FRUGAL_CHECK(cols > 0 && residual_.size() % cols == 0,
               fmt::format("threshold: {} columns do not divide the residual of {} entries", cols,
                           residual_.size()));
  const size_t total_rows = residual_.size() / cols;
  for (size_t k = 0; k < rows.size(); ++k) {
    FRUGAL_CHECK(rows[k] < total_rows && (k == 0 || rows[k] > rows[k - 1]),
                 fmt::format("threshold: row {} (at position {}) is not increasing or not < {} rows",
                             rows[k], k, total_rows));
  }
  // Indices travel as uint32 (comm/codec.h): the last flat index sent must fit.
  FRUGAL_CHECK(rows.empty() ||
                   (static_cast<uint64_t>(rows.back()) + 1) * cols - 1 <= std::numeric_limits<uint32_t>::max(),
               fmt::format("threshold: row {} of {} columns has flat indices beyond 2^32-1; the "
                           "parameter is too large for one compressed exchange", rows.back(), cols));
  accumulate_and_select(cols, rows, values, wire, indices, sent);
  if (!velocity_.empty())
    for (const uint32_t i : indices) velocity_[i] = 0.0f;  // momentum factor masking: a sent entry starts afresh
}

void Thresholder::accumulate_and_select(size_t cols, std::span<const uint32_t> rows, const float* values,
                                        ValueType wire, std::vector<uint32_t>& indices, std::vector<float>& sent) {
  const size_t n = rows.size() * cols;
  auto acc = [&](size_t k) -> float& { return residual_[rows[k / cols] * cols + k % cols]; };
  const float keep = this->keep();
  const bool send_all = keep >= 1.0f;  // no thresholding: the uncompressed exchange
  if (options_.per_row && !send_all && wire != ValueType::sign) {
    ++steps_;
    select_per_row(cols, rows, values, keep, wire, indices, sent);
    return;
  }
  for (size_t j = 0; j < rows.size(); ++j) accumulate(static_cast<size_t>(rows[j]) * cols, values + j * cols, cols);
  if (estimate_due()) estimate_pending_ = true;
  if (send_all) {
    tau_ = 0.0f;
    estimate_pending_ = false;
  } else if (estimate_pending_ && n > 0) {
    // Over the candidates only: the untouched rows' residual is not part of this step's message.
    std::vector<float> m(options_.exact ? n : options_.sample_size);
    if (options_.exact) {
      for (size_t k = 0; k < n; ++k) m[k] = std::abs(acc(k));
    } else {
      for (float& x : m) x = std::abs(acc(rng_.below(n)));
    }
    tau_ = kth_largest(m, keep);
    estimate_pending_ = false;
  }
  ++steps_;

  indices.clear();
  sent.clear();
  const bool measure = options_.auto_energy > 0.0f;  // as in compress()
  double total = 0.0, carried = 0.0;
  if (wire == ValueType::sign) {
    if (measure) {
      for (size_t k = 0; k < n; ++k) total += static_cast<double>(acc(k)) * acc(k);
    }
    send_signs(cols, rows, n, indices, sent);
    if (measure) {
      for (const float v : sent) carried += static_cast<double>(v) * v;
    }
    adapt_keep(total, carried);
    return;
  }
  const bool floor = options_.row_floor && !send_all;
  size_t explored = send_all ? SIZE_MAX : first_explored();  // a flat position over the candidates
  for (size_t j = 0; j < rows.size(); ++j) {
    const size_t base = static_cast<size_t>(rows[j]) * cols, row_begin = indices.size();
    size_t reached = 0;     // entries of the row at or above tau (the floor acts when none is)
    bool largest_sent = false;
    size_t largest = cols;  // the row's largest non-zero magnitude, for the floor
    float largest_magnitude = 0.0f;
    for (size_t c = 0; c < cols; ++c) {
      float& a = residual_[base + c];
      if (measure) total += static_cast<double>(a) * a;
      if (floor && std::abs(a) > largest_magnitude) {
        largest_magnitude = std::abs(a);
        largest = c;
        largest_sent = false;
      }
      const bool above = std::abs(a) >= tau_ && a != 0.0f;
      reached += above ? 1 : 0;
      bool take = send_all || above;
      if (j * cols + c == explored) {  // Slim-DP's exploration: sent whatever its size
        take = take || a != 0.0f;
        explored += explore_gap();
      }
      if (!take) continue;
      const float r = round_to_wire(a, wire);
      if (!send_all && r == 0.0f) continue;  // rounds away on the wire: keep all of it for later
      indices.push_back(static_cast<uint32_t>(base + c));
      sent.push_back(r);
      if (measure) carried += static_cast<double>(r) * r;
      a -= r;  // exact (Sterbenz): r is a rounded to fewer mantissa bits
      if (c == largest) largest_sent = true;
    }
    if (floor && reached == 0 && !largest_sent && largest < cols) {  // nothing reached tau: the row's largest
      float& a = residual_[base + largest];
      const float r = round_to_wire(a, wire);
      if (r == 0.0f) continue;
      indices.push_back(static_cast<uint32_t>(base + largest));
      sent.push_back(r);
      if (measure) carried += static_cast<double>(r) * r;
      a -= r;
      if (indices.size() - row_begin > 1) sort_row_tail(indices, sent, row_begin);  // after explored entries
    }
  }
  adapt_keep(total, carried);
}

namespace {
// sum of v[c]^2 in doubles, four partial sums held in registers (a running total kept across the
// accumulate() call spilled to the stack every entry: a store-to-load chain 128 long a row).
double sum_of_squares(const float* v, size_t n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  size_t c = 0;
  for (; c + 4 <= n; c += 4)
    for (size_t l = 0; l < 4; ++l) s[l] += static_cast<double>(v[c + l]) * v[c + l];
  for (; c < n; ++c) s[0] += static_cast<double>(v[c]) * v[c];
  return (s[0] + s[1]) + (s[2] + s[3]);
}
}  // namespace

void Thresholder::select_per_row(size_t cols, std::span<const uint32_t> rows, const float* values, float keep,
                                 ValueType wire, std::vector<uint32_t>& indices, std::vector<float>& sent) {
  indices.clear();
  sent.clear();
  const auto k = std::clamp<size_t>(static_cast<size_t>(std::ceil(keep * static_cast<float>(cols) * (1.0f - 1e-6f))), 1,
                                    cols);
  std::vector<uint32_t> order;
  const bool measure = options_.auto_energy > 0.0f;
  double total = 0.0, carried = 0.0;
  size_t explored = first_explored();  // a flat position over the candidates (rows x cols)
  std::vector<char> chosen(options_.explore > 0.0f ? cols : 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint32_t row = rows[r];
    float* a = residual_.data() + static_cast<size_t>(row) * cols;
    // Each row accumulated just before its selection reads it: the row is read from memory once (a
    // pass accumulating every row first had the selection read them back: 6M entries a step at
    // 100k labels, far more than the cache holds).
    accumulate(static_cast<size_t>(row) * cols, values + r * cols, cols);
    if (measure) total += sum_of_squares(a, cols);
    largest_ascending(a, cols, k, order);
    const size_t row_begin = indices.size();
    for (size_t j = 0; j < k; ++j) {
      float& v = a[order[j]];
      const float r = round_to_wire(v, wire);
      if (r == 0.0f) continue;  // zero, or rounds away on the wire: keep all of it for later
      indices.push_back(static_cast<uint32_t>(static_cast<size_t>(row) * cols + order[j]));
      sent.push_back(r);
      if (measure) carried += static_cast<double>(r) * r;
      v -= r;
    }
    if (chosen.empty()) continue;
    // Slim-DP's exploration: entries of the row beyond its top k, each with probability explore.
    // Sent in column order after the top k, then the row's indices sorted again.
    std::fill(chosen.begin(), chosen.end(), 0);
    for (size_t j = 0; j < k; ++j) chosen[order[j]] = 1;
    const size_t first = r * cols;
    bool added = false;
    for (; explored < first + cols; explored += explore_gap()) {
      const size_t c = explored - first;
      float& v = a[c];
      if (chosen[c]) continue;
      const float rounded = round_to_wire(v, wire);
      if (rounded == 0.0f) continue;
      indices.push_back(static_cast<uint32_t>(static_cast<size_t>(row) * cols + c));
      sent.push_back(rounded);
      if (measure) carried += static_cast<double>(rounded) * rounded;
      v -= rounded;
      added = true;
    }
    if (added) sort_row_tail(indices, sent, row_begin);
  }
  adapt_keep(total, carried);
}

void Thresholder::send_signs(size_t cols, std::span<const uint32_t> rows, size_t n, std::vector<uint32_t>& indices,
                             std::vector<float>& sent) {
  // Every selected entry travels as +-scale, scale the mean magnitude of the selection (with keep 1,
  // every non-zero candidate); each keeps what the sign did not carry in its residual.
  auto acc = [&](size_t k) -> float& { return residual_[rows[k / cols] * cols + k % cols]; };
  double sum = 0.0;
  for (size_t k = 0; k < n; ++k) {
    const float a = acc(k);
    if (a != 0.0f && std::abs(a) >= tau_) {
      indices.push_back(static_cast<uint32_t>(rows[k / cols] * cols + k % cols));
      sum += std::abs(a);
    }
  }
  const auto scale = indices.empty() ? 0.0f : static_cast<float>(sum / static_cast<double>(indices.size()));
  if (!(scale > 0.0f) || !std::isfinite(scale)) {  // nothing selected, or magnitudes below float's range
    indices.clear();
    return;
  }
  sent.resize(indices.size());
  for (size_t j = 0; j < indices.size(); ++j) {
    float& a = residual_[indices[j]];
    sent[j] = std::copysign(scale, a);
    a -= sent[j];
  }
}

ThresholderState Thresholder::state() const {
  return {residual_, velocity_, tau_, steps_, estimate_pending_, rng_.state(), auto_keep_, carried_energy_, backoffs_};
}

void Thresholder::restore(const ThresholderState& state) {
  FRUGAL_CHECK(state.residual.size() == residual_.size(),
               fmt::format("threshold: a saved residual of {} entries cannot restore one of {}", state.residual.size(),
                           residual_.size()));
  FRUGAL_CHECK(state.velocity.empty() || state.velocity.size() == residual_.size(),
               fmt::format("threshold: a saved velocity of {} entries cannot restore one of {}", state.velocity.size(),
                           residual_.size()));
  residual_ = state.residual;
  // Momentum correction on: the saved velocity, or zeros when it was off; off: none kept.
  if (!velocity_.empty()) {
    if (state.velocity.empty())
      std::fill(velocity_.begin(), velocity_.end(), 0.0f);
    else
      velocity_ = state.velocity;
  }
  tau_ = state.tau;
  steps_ = state.steps;
  estimate_pending_ = state.estimate_pending;
  rng_.set_state(state.rng);
  auto_keep_ = state.auto_keep;
  carried_energy_ = state.carried_energy;
  backoffs_ = state.backoffs;
}

}  // namespace frugal::comm
