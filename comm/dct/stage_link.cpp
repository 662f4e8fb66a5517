#include "comm/dct/stage_link.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "comm/codec.h"
#include "comm/dct/largest.h"
#include "comm/dct/scaled_int8.h"
#include "core/check.h"
#include "core/hash32.h"

namespace frugal::comm {
namespace {
constexpr uint8_t kEscape = 255;
constexpr size_t kHeaderBytes = 12;  // rows (u32), width (u32), compressed (u32: 0 or 1)
}  // namespace

PipelineLink::PipelineLink(Communicator& group, int peer, size_t width, const MpCompression& options, int tag)
    : group_(group), peer_(peer), width_(width), options_(options), tag_(tag) {
  options_.validate();
  FRUGAL_CHECK(peer >= 0 && peer < group.size() && peer != group.rank(),
               fmt::format("pipeline boundary: peer {} is not another rank of the {}-rank pipeline", peer, group.size()));
  set_step(UINT64_MAX);
}

void PipelineLink::set_step(uint64_t step) {
  step_ = step;
  kept_count_ = options_.kept_of(width_, step);
  compress_ = options_.wire != ValueType::f32 || adaptive() || kept_count_ < width_;
}

[[noreturn]] void PipelineLink::fail(const char* what, const std::string& why) const {
  throw Error(fmt::format("pipeline boundary: rank {} sent a bad {} message: {}; the stages disagree on the "
                          "micro-batches or on the DCT-MP settings, or the bytes are damaged",
                          peer_, what, why));
}

void PipelineLink::select(const Tensor& a, Kept& kept) const {
  kept.rows = a.rows();
  kept.whole = !adaptive() && kept_count_ >= width_;
  kept.pos.clear();
  kept.off.assign(1, 0);
  if (kept.whole) return;
  std::vector<uint32_t> order;
  for (size_t i = 0; i < a.rows(); ++i) {
    const float* v = a.row(i);
    if (!adaptive()) {
      largest_ascending(v, width_, kept_count_, order);
      kept.pos.insert(kept.pos.end(), order.begin(), order.end());
      kept.off.push_back(kept.pos.size());
      continue;
    }
    // The fewest of the top k whose magnitudes cover `mass` of the row's L1 mass.
    partition_largest(v, width_, kept_count_, order);
    double total = 0.0;
    for (size_t j = 0; j < width_; ++j) total += std::abs(v[j]);
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept_count_), LargerMagnitude{v});
    double covered = 0.0;
    size_t count = 0;
    while (count < kept_count_ && covered < options_.mass * total) covered += std::abs(v[order[count++]]);
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
    kept.pos.insert(kept.pos.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
    kept.off.push_back(kept.pos.size());
  }
}

size_t PipelineLink::row_bytes(size_t n) const {
  return options_.wire == ValueType::i8 ? scaled_i8_bytes(n) : n * value_bytes(options_.wire);
}

size_t PipelineLink::kept_bytes(const Kept& kept) const {
  size_t bytes = 0;
  for (size_t i = 0; i < kept.rows; ++i) bytes += row_bytes(kept.whole ? width_ : kept.off[i + 1] - kept.off[i]);
  return bytes;
}

void PipelineLink::read_kept(const std::byte* in, const Kept& kept, Tensor& out) {
  out.zero();
  for (size_t i = 0; i < kept.rows; ++i) {
    const size_t n = kept.whole ? width_ : kept.off[i + 1] - kept.off[i];
    row_.resize(n);
    get_row(in, row_);
    in += row_bytes(n);
    float* row = out.row(i);
    for (size_t j = 0; j < n; ++j) row[kept.whole ? j : kept.pos[kept.off[i] + j]] = row_[j];
  }
}

void PipelineLink::put_row(std::span<const float> values, std::byte* out, uint32_t stochastic_key) const {
  if (options_.wire == ValueType::i8) {
    write_scaled_i8(values, out, stochastic_key);
    return;
  }
  const size_t vb = value_bytes(options_.wire);
  for (const float v : values) write_value(options_.wire, v, out), out += vb;
}

void PipelineLink::get_row(const std::byte* in, std::span<float> values) const {
  if (options_.wire == ValueType::i8) {
    read_scaled_i8(in, values);
    return;
  }
  const size_t vb = value_bytes(options_.wire);
  for (float& v : values) v = read_value(options_.wire, in), in += vb;
}

void PipelineLink::write_index(uint32_t value) {
  if (value < kEscape) {
    message_.push_back(static_cast<std::byte>(value));
    return;
  }
  message_.push_back(static_cast<std::byte>(kEscape));
  const size_t at = message_.size();
  message_.resize(at + 4);
  std::memcpy(message_.data() + at, &value, 4);
}

void PipelineLink::write_header(size_t rows, bool compressed) {
  const uint32_t h[3] = {static_cast<uint32_t>(rows), static_cast<uint32_t>(width_), compressed ? 1u : 0u};
  message_.resize(kHeaderBytes);
  std::memcpy(message_.data(), h, kHeaderBytes);
}

std::pair<size_t, bool> PipelineLink::read_header(const std::vector<std::byte>& bytes, const char* what) const {
  if (bytes.size() < kHeaderBytes) fail(what, fmt::format("{} bytes, shorter than its header", bytes.size()));
  uint32_t h[3];
  std::memcpy(h, bytes.data(), kHeaderBytes);
  if (h[1] != width_) fail(what, fmt::format("{} columns, this boundary carries {}", h[1], width_));
  if (h[2] > 1) fail(what, "an unknown encoding");
  return {h[0], h[2] == 1};
}

void PipelineLink::send(std::vector<std::byte>& bytes) {
  payload_sent_ += bytes.size();
  sends_.push_back(group_.send(peer_, tag_, bytes));  // the communicator copies the bytes
}

void PipelineLink::wait_sends() {
  std::vector<Work> pending;
  pending.swap(sends_);
  for (Work& w : pending) w.wait();
}

uint32_t PipelineLink::rounding_key(size_t micro, size_t sample) const {
  uint32_t h = lowbias32(static_cast<uint32_t>(step_) ^ lowbias32(static_cast<uint32_t>(step_ >> 32) + static_cast<uint32_t>(tag_)));
  h = lowbias32(h + static_cast<uint32_t>(micro));
  return lowbias32(h + static_cast<uint32_t>(sample)) | 1u;
}

void PipelineLink::send_forward(const Tensor& a, size_t micro) {
  FRUGAL_CHECK(a.is_host() && a.dtype() == Dtype::f32 && a.cols() == width_,
               fmt::format("pipeline boundary: activations of {} columns (host f32 expected, {} columns)", a.cols(), width_));
  Kept& kept = kept_positions_[micro];
  select(a, kept);
  const size_t rows = a.rows();
  payload_uncompressed_ += rows * width_ * sizeof(float);
  write_header(rows, compress_);
  if (!compress_) {
    message_.resize(kHeaderBytes + rows * width_ * sizeof(float));
    if (rows > 0) std::memcpy(message_.data() + kHeaderBytes, a.data(), rows * width_ * sizeof(float));
    send(message_);
    return;
  }
  for (size_t i = 0; i < rows; ++i) {
    if (kept.whole) break;
    const size_t n = kept.off[i + 1] - kept.off[i];
    if (adaptive()) write_index(static_cast<uint32_t>(n));
    uint32_t next = 0;  // gaps from the position after the previous one
    for (size_t j = kept.off[i]; j < kept.off[i + 1]; ++j) {
      write_index(kept.pos[j] - next);
      next = kept.pos[j] + 1;
    }
  }
  for (size_t i = 0; i < rows; ++i) {
    const float* v = a.row(i);
    row_.clear();
    if (kept.whole)
      row_.assign(v, v + width_);
    else
      for (size_t j = kept.off[i]; j < kept.off[i + 1]; ++j) row_.push_back(v[kept.pos[j]]);
    const size_t at = message_.size();
    message_.resize(at + row_bytes(row_.size()));
    put_row(row_, message_.data() + at, 0);
  }
  send(message_);
}

const Tensor& PipelineLink::recv_forward(size_t micro) {
  group_.recv(peer_, tag_, incoming_).wait();
  const auto [rows, compressed] = read_header(incoming_, "activation");
  received_.resize(rows, width_);
  const std::byte* in = incoming_.data() + kHeaderBytes;
  const std::byte* end = incoming_.data() + incoming_.size();
  Kept& kept = kept_positions_[micro];
  kept.rows = rows;
  kept.pos.clear();
  kept.off.assign(1, 0);
  if (!compressed) {
    if (static_cast<size_t>(end - in) != rows * width_ * sizeof(float))
      fail("activation", fmt::format("{} bytes of f32 rows, expected {}", end - in, rows * width_ * sizeof(float)));
    if (rows > 0) std::memcpy(received_.data(), in, rows * width_ * sizeof(float));
    kept.whole = true;
    return received_;
  }
  kept.whole = !adaptive() && kept_count_ >= width_;
  const auto index = [&](size_t sample, bool& escaped) -> uint32_t {
    if (in == end) fail("activation", fmt::format("it ends within the positions of sample {}", sample));
    const auto first = static_cast<uint8_t>(*in++);
    escaped = first == kEscape;
    if (!escaped) return first;
    if (end - in < 4) fail("activation", fmt::format("it ends within an escaped position of sample {}", sample));
    uint32_t v;
    std::memcpy(&v, in, 4);
    in += 4;
    return v;
  };
  if (!kept.whole)
    for (size_t i = 0; i < rows; ++i) {
      bool escaped = false;
      const size_t n = adaptive() ? index(i, escaped) : kept_count_;
      if (n > kept_count_) fail("activation", fmt::format("sample {} keeps {} positions, more than {}", i, n, kept_count_));
      uint32_t next = 0;
      for (size_t j = 0; j < n; ++j) {
        const uint64_t p = uint64_t{next} + index(i, escaped);
        if (p >= width_) fail("activation", fmt::format("position {} of sample {} is beyond the width {}", p, i, width_));
        kept.pos.push_back(static_cast<uint32_t>(p));
        next = static_cast<uint32_t>(p + 1);
      }
      kept.off.push_back(kept.pos.size());
    }
  if (static_cast<size_t>(end - in) != kept_bytes(kept))
    fail("activation", fmt::format("{} value bytes follow the positions, expected {}", end - in, kept_bytes(kept)));
  read_kept(in, kept, received_);
  return received_;
}

void PipelineLink::send_backward(const Tensor& g, size_t micro) {
  const auto it = kept_positions_.find(micro);
  FRUGAL_CHECK(it != kept_positions_.end(), fmt::format("pipeline boundary: no activations of micro-batch {} arrived "
                                                        "before its gradient was sent", micro));
  const Kept& kept = it->second;
  FRUGAL_CHECK(g.is_host() && g.dtype() == Dtype::f32 && g.rows() == kept.rows && g.cols() == width_,
               fmt::format("pipeline boundary: a gradient of {}x{} for activations of {}x{}", g.rows(), g.cols(),
                           kept.rows, width_));
  const size_t rows = kept.rows;
  payload_uncompressed_ += rows * width_ * sizeof(float);
  const bool compressed = compress_ || !kept.whole;
  write_header(rows, compressed);
  if (!compressed) {
    message_.resize(kHeaderBytes + rows * width_ * sizeof(float));
    if (rows > 0) std::memcpy(message_.data() + kHeaderBytes, g.data(), rows * width_ * sizeof(float));
    send(message_);
    kept_positions_.erase(it);
    return;
  }
  const bool feedback = options_.error_feedback;
  if (feedback && feedback_.rows() < rows) {  // grown to the largest micro-batch seen, new rows zero
    Tensor grown(rows, width_);
    for (size_t i = 0; i < feedback_.rows(); ++i) std::copy_n(feedback_.row(i), width_, grown.row(i));
    feedback_ = std::move(grown);
  }
  std::vector<float> delivered;
  for (size_t i = 0; i < rows; ++i) {
    const float* v = g.row(i);
    float* fb = feedback ? feedback_.row(i) : nullptr;
    if (fb != nullptr)
      for (size_t j = 0; j < width_; ++j) fb[j] += v[j];  // what is owed, this step's gradient included
    const float* src = fb != nullptr ? fb : v;
    const size_t n = kept.whole ? width_ : kept.off[i + 1] - kept.off[i];
    row_.resize(n);
    for (size_t j = 0; j < n; ++j) row_[j] = src[kept.whole ? j : kept.pos[kept.off[i] + j]];
    const size_t at = message_.size();
    message_.resize(at + row_bytes(n));
    put_row(row_, message_.data() + at, rounding_key(micro, i));
    if (fb == nullptr) continue;
    delivered.resize(n);
    get_row(message_.data() + at, delivered);  // what the producer will read, rounding included
    for (size_t j = 0; j < n; ++j) fb[kept.whole ? j : kept.pos[kept.off[i] + j]] -= delivered[j];
  }
  send(message_);
  kept_positions_.erase(it);
}

const Tensor& PipelineLink::recv_backward(size_t micro) {
  const auto it = kept_positions_.find(micro);
  FRUGAL_CHECK(it != kept_positions_.end(), fmt::format("pipeline boundary: a gradient for micro-batch {}, whose "
                                                        "activations were not sent", micro));
  const Kept& kept = it->second;
  group_.recv(peer_, tag_, incoming_).wait();
  const auto [rows, compressed] = read_header(incoming_, "gradient");
  if (rows != kept.rows) fail("gradient", fmt::format("{} rows for a micro-batch of {}", rows, kept.rows));
  gradient_.resize(rows, width_);
  const std::byte* in = incoming_.data() + kHeaderBytes;
  const size_t left = incoming_.size() - kHeaderBytes;
  if (!compressed) {
    if (left != rows * width_ * sizeof(float))
      fail("gradient", fmt::format("{} bytes of f32 rows, expected {}", left, rows * width_ * sizeof(float)));
    if (rows > 0) std::memcpy(gradient_.data(), in, left);
    kept_positions_.erase(it);
    return gradient_;
  }
  if (left != kept_bytes(kept)) fail("gradient", fmt::format("{} value bytes, expected {}", left, kept_bytes(kept)));
  read_kept(in, kept, gradient_);
  kept_positions_.erase(it);
  return gradient_;
}

}  // namespace frugal::comm
