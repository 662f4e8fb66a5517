// CRC32C (Castagnoli), the checksum in every frame header (comm/frame.cpp) and of every checkpoint file. Uses the SSE4.2 instruction when the CPU
// has it (checked at run time, so the binary still runs on CPUs without it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace frugal {

// crc32c(data) for one buffer; pass the previous result as `crc` to continue over several.
uint32_t crc32c(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace frugal
