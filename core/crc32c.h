// CRC32C (Castagnoli), the checksum in every frame header (comm/frame.cpp) and of every checkpoint
// file. Uses the SSE4.2 instruction when the CPU has it (checked at run time, so the binary still
// runs on CPUs without it), on three interleaved streams: each crc32 instruction has a latency of 3
// cycles and a throughput of 1, so one stream runs at a third of the speed the unit has. The
// streams' CRCs are joined by shifting one over the others' length (zlib's crc32_combine, tables
// per power-of-two block as in Mark Adler's crc32c.c).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace frugal {

// crc32c(data) for one buffer; pass the previous result as `crc` to continue over several.
uint32_t crc32c(std::span<const std::byte> data, uint32_t crc = 0);
// The same by a byte-at-a-time table: what a CPU without SSE4.2 runs (tests compare the two).
uint32_t crc32c_portable(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace frugal
