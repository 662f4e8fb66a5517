// libFuzzer target: the frame decoder. The first 56 bytes are the header, the rest the payload.
// Any input must either decode or throw FrameError; nothing else (no crash, no other exception).
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  const size_t cut = size < frugal::comm::kFrameHeaderBytes ? size : frugal::comm::kFrameHeaderBytes;
  try {
    const auto h = frugal::comm::decode_header(in.first(cut));
    frugal::comm::check_payload(h, in.subspan(cut));
    // A frame that passed must re-encode to the same header bytes.
    const auto again = frugal::comm::encode_header(h);
    for (size_t i = 0; i < again.size(); ++i) {
      if (again[i] != in[i]) __builtin_trap();
    }
  } catch (const frugal::comm::FrameError&) {
  }
  return 0;
}
