// The wire format. Every message between ranks is a fixed 56-byte header followed by the payload.
// The header names the sender, the communicator, the collective's sequence number and its step, and
// carries CRC32Cs of itself and of the payload, so a truncated, corrupted or forged frame is
// rejected with a message that says what was wrong instead of being misread. Little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/work.h"

namespace frugal::comm {

inline constexpr uint32_t kFrameMagic = 0x4c475246;  // "FRGL" in memory order
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 56;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;

enum class FrameKind : uint8_t {
  collective = 1,  // one piece of a collective: (comm, seq, step, part) name it
  p2p = 2,         // point to point; `step` holds the tag
  heartbeat = 3,   // "still alive", sent when a link is otherwise quiet
  abort = 4,       // the sender aborted communicator `comm_id`; payload: the reason (text)
  goodbye = 5,     // the sender shut down cleanly
  hello = 6,       // rendezvous: rank -> coordinator (payload: JSON)
  welcome = 7,     // rendezvous: coordinator -> rank, the peer table (payload: JSON)
  reject = 8,      // rendezvous: coordinator refuses to start (payload: the reason)
};
std::string_view to_string(FrameKind kind);

struct FrameHeader {
  FrameKind kind = FrameKind::collective;
  uint8_t op = 0;      // OpKind of a collective frame (for accounting and error messages)
  uint32_t src = 0;    // sender's world rank
  uint32_t step = 0;   // step of the collective's algorithm, or the tag of a p2p frame
  uint64_t comm_id = 0;
  uint64_t seq = 0;    // collective number on that communicator, counted from 1
  uint32_t part = 0;   // segment within the step
  uint32_t sig = 0;    // signature of the collective call (kind, sizes, op, root)
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;
};

// The frame is malformed; what() says which check failed.
class FrameError : public CommError {
 public:
  using CommError::CommError;
};

// Fills payload_bytes and payload_crc from `payload` and serializes the header.
std::array<std::byte, kFrameHeaderBytes> encode_header(FrameHeader header,
                                                       std::span<const std::byte> payload);
// Same, for a header whose payload fields are already set (the payload is checksummed elsewhere).
std::array<std::byte, kFrameHeaderBytes> encode_header(const FrameHeader& header);

// Parses and checks a header: length, magic, protocol version, header checksum, kind, op, size.
FrameHeader decode_header(std::span<const std::byte> bytes);
// Checks that `payload` is the one the header announced: length and checksum.
void check_payload(const FrameHeader& header, std::span<const std::byte> payload);

}  // namespace frugal::comm
