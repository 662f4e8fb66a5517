#include "comm/frame.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "core/comm_stats.h"
#include "core/crc32c.h"

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

namespace frugal::comm {
namespace {

template <class T>
void put(std::array<std::byte, kFrameHeaderBytes>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
template <class T>
T get(std::span<const std::byte> b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

constexpr size_t kHeaderCrcAt = kFrameHeaderBytes - 4;

}  // namespace

std::string_view to_string(FrameKind kind) {
  switch (kind) {
    case FrameKind::collective: return "collective";
    case FrameKind::p2p: return "p2p";
    case FrameKind::heartbeat: return "heartbeat";
    case FrameKind::abort: return "abort";
    case FrameKind::goodbye: return "goodbye";
    case FrameKind::hello: return "hello";
    case FrameKind::welcome: return "welcome";
    case FrameKind::reject: return "reject";
  }
  return "unknown";
}

std::array<std::byte, kFrameHeaderBytes> encode_header(FrameHeader header,
                                                       std::span<const std::byte> payload) {
  header.payload_bytes = payload.size();
  header.payload_crc = crc32c(payload);
  return encode_header(header);
}

std::array<std::byte, kFrameHeaderBytes> encode_header(const FrameHeader& h) {
  std::array<std::byte, kFrameHeaderBytes> b{};
  put(b, 0, kFrameMagic);
  put(b, 4, kProtocolVersion);
  put(b, 6, static_cast<uint8_t>(h.kind));
  put(b, 7, h.op);
  put(b, 8, h.src);
  put(b, 12, h.step);
  put(b, 16, h.comm_id);
  put(b, 24, h.seq);
  put(b, 32, h.part);
  put(b, 36, h.sig);
  put(b, 40, h.payload_bytes);
  put(b, 48, h.payload_crc);
  put(b, kHeaderCrcAt, crc32c(std::span<const std::byte>(b.data(), kHeaderCrcAt)));
  return b;
}

FrameHeader decode_header(std::span<const std::byte> b) {
  if (b.size() != kFrameHeaderBytes) {
    throw FrameError(fmt::format("bad frame: header is {} bytes, expected {}{}", b.size(),
                                 kFrameHeaderBytes, b.size() < kFrameHeaderBytes ? " (truncated)" : ""));
  }
  const auto magic = get<uint32_t>(b, 0);
  if (magic != kFrameMagic) {
    throw FrameError(fmt::format("bad frame: magic {:#010x} is not frugal's {:#010x}", magic,
                                 kFrameMagic));
  }
  const auto version = get<uint16_t>(b, 4);
  if (version != kProtocolVersion) {
    throw FrameError(fmt::format("bad frame: protocol version {}, this build speaks {} (mixed "
                                 "frugal versions in one run?)", version, kProtocolVersion));
  }
  const auto want = get<uint32_t>(b, kHeaderCrcAt);
  const auto have = crc32c(b.first(kHeaderCrcAt));
  if (want != have) {
    throw FrameError(fmt::format("bad frame: header checksum {:#010x} does not match its "
                                 "contents ({:#010x}): corrupted or forged", want, have));
  }
  FrameHeader h;
  const auto kind = get<uint8_t>(b, 6);
  if (kind < 1 || kind > static_cast<uint8_t>(FrameKind::reject)) {
    throw FrameError(fmt::format("bad frame: unknown message kind {}", kind));
  }
  h.kind = static_cast<FrameKind>(kind);
  h.op = get<uint8_t>(b, 7);
  if (h.op >= kOpKinds) throw FrameError(fmt::format("bad frame: unknown operation kind {}", h.op));
  h.src = get<uint32_t>(b, 8);
  h.step = get<uint32_t>(b, 12);
  h.comm_id = get<uint64_t>(b, 16);
  h.seq = get<uint64_t>(b, 24);
  h.part = get<uint32_t>(b, 32);
  h.sig = get<uint32_t>(b, 36);
  h.payload_bytes = get<uint64_t>(b, 40);
  h.payload_crc = get<uint32_t>(b, 48);
  if (h.payload_bytes > kMaxPayloadBytes) {
    throw FrameError(fmt::format("bad frame: payload length {} exceeds the limit {}",
                                 h.payload_bytes, kMaxPayloadBytes));
  }
  return h;
}

void check_payload(const FrameHeader& h, std::span<const std::byte> payload) {
  if (payload.size() != h.payload_bytes) {
    throw FrameError(fmt::format("bad {} frame from rank {}: payload is {} bytes, header says {}{}",
                                 to_string(h.kind), h.src, payload.size(), h.payload_bytes,
                                 payload.size() < h.payload_bytes ? " (truncated)" : ""));
  }
  const auto have = crc32c(payload);
  if (have != h.payload_crc) {
    throw FrameError(fmt::format("bad {} frame from rank {}: payload checksum {:#010x}, header "
                                 "says {:#010x}: corrupted in transit or forged",
                                 to_string(h.kind), h.src, have, h.payload_crc));
  }
}

}  // namespace frugal::comm
