// libFuzzer target: packed data files (core/data/packed_file.h), read block by block as training and
// `frugal predict` read them. Every input is read or refused with frugal::Error naming the file, in
// frugal's words; a count or an offset in a damaged file never becomes an allocation of that size
// (std::bad_alloc, std::length_error), a read past a buffer or a crash.
//
// The first byte is the mode: bit 0 fixes the header's CRC32C (the four bytes at the end), so that the
// fuzzer reaches the header's fields and the blocks behind the check.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/data/packed_file.h"
#include "core/sparse_batch.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((mode & 1) && file.size() >= frugal::data::kPackedPrefixBytes + 4) {
    uint64_t at = 0, len = 0;
    std::memcpy(&at, file.data() + 16, 8);
    std::memcpy(&len, file.data() + 24, 8);
    if (at <= file.size() && len == file.size() - at - 4 && at >= frugal::data::kPackedPrefixBytes) {
      uint32_t crc = frugal::crc32c(std::as_bytes(std::span<const char>(file.data(), frugal::data::kPackedPrefixBytes)));
      crc = frugal::crc32c(std::as_bytes(std::span<const char>(file.data() + at, len)), crc);
      std::memcpy(file.data() + file.size() - 4, &crc, 4);
    }
  }
  const std::string path = fuzz_input_file("data.fpk", file);
  try {
    frugal::data::PackedReader reader(path);
    const auto& h = reader.header();
    for (uint64_t b = 0; b < h.blocks(); ++b) {
      if (h.kind == frugal::data::PackedKind::points) {
        frugal::SparseBatch batch;
        reader.read_points(b, batch);
        if (batch.size() != h.block_size(b)) __builtin_trap();
      } else {
        std::vector<frugal::data::CtrRecord> rows;
        reader.read_clicks(b, rows);
        if (rows.size() != h.block_size(b)) __builtin_trap();
      }
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, file);
  }
  return 0;
}
