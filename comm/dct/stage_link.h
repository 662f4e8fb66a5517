// StageLink (comm/exchange.h) between two ranks of a pipeline: DCT-MP's compression of one
// boundary's activations and gradients over point-to-point messages instead of collectives.
//
// Forward message: a 12-byte header (rows, width, flags), then, compressed, every sample's kept
// positions (ascending, gap-coded in one byte each; an escape byte and the position in 4 bytes
// for gaps of 255 or more; with an adaptive k the count first) followed by every sample's values
// in the wire type; uncompressed, the rows as f32. Backward message: the same header and the values
// at the kept positions only (the producer knows them), gradients rounding stochastically in int8.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/communicator.h"
#include "comm/exchange.h"
#include "core/tensor.h"

namespace frugal::comm {

class PipelineLink : public StageLink {
 public:
  PipelineLink(Communicator& group, int peer, size_t width, const MpCompression& options, int tag);

  void set_step(uint64_t step) override;
  void send_forward(const Tensor& activations, size_t micro) override;
  const Tensor& recv_backward(size_t micro) override;
  const Tensor& recv_forward(size_t micro) override;
  void send_backward(const Tensor& gradient, size_t micro) override;
  void forget(size_t micro) override { kept_positions_.erase(micro); }
  void wait_sends() override;
  uint64_t payload_sent() const override { return payload_sent_; }
  uint64_t payload_uncompressed() const override { return payload_uncompressed_; }

 private:
  // One micro-batch's kept positions: sample i's are pos[off[i] .. off[i + 1]).
  struct Kept {
    size_t rows = 0;
    bool whole = true;  // every position (no positions travel)
    std::vector<uint32_t> pos;
    std::vector<size_t> off;
  };
  bool adaptive() const { return options_.mass < 1.0; }
  void select(const Tensor& activations, Kept& kept) const;
  size_t row_bytes(size_t n) const;
  // The value bytes of a message carrying `kept`'s rows; reading them into `out` at their positions
  // (zero elsewhere).
  size_t kept_bytes(const Kept& kept) const;
  void read_kept(const std::byte* in, const Kept& kept, Tensor& out);
  void put_row(std::span<const float> values, std::byte* out, uint32_t stochastic_key) const;
  void get_row(const std::byte* in, std::span<float> values) const;
  void write_index(uint32_t value);
  void write_header(size_t rows, bool compressed);
  // Reads and checks a header; returns the rows and whether the body is compressed.
  std::pair<size_t, bool> read_header(const std::vector<std::byte>& bytes, const char* what) const;
  [[noreturn]] void fail(const char* what, const std::string& why) const;
  void send(std::vector<std::byte>& bytes);
  uint32_t rounding_key(size_t micro, size_t sample) const;

  Communicator& group_;
  int peer_;
  size_t width_;
  MpCompression options_;
  int tag_;
  uint64_t step_ = UINT64_MAX;
  size_t kept_count_ = 0;  // positions kept per sample (at most, when adaptive) this step
  bool compress_ = false;
  std::map<size_t, Kept> kept_positions_;  // per micro-batch in flight
  std::vector<Work> sends_;  // in flight (the communicator copied their bytes)
  std::vector<std::byte> message_, incoming_;
  std::vector<float> row_;
  Tensor received_, gradient_;
  Tensor feedback_;  // MpCompression::error_feedback: what the backward messages did not deliver
  uint64_t payload_sent_ = 0, payload_uncompressed_ = 0;
};

}  // namespace frugal::comm
