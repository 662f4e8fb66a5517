// libFuzzer target: the checkpoint slice-file reader (train/checkpoint_slice.h) and the
// checksum check in front of it. Any input must be decoded or refused with frugal::Error; any other
// exception (std::bad_alloc or std::length_error from a count in the file, cereal's own error) or a
// crash is a bug, and a slice that decodes must fit its parameter (what restoring indexes by): a
// moment is absent, per element (the weights' shape) or per row (row-wise optimizers: one column).
//
// The first byte picks a mode, then come the stored CRC32C (4 bytes, little-endian) and the file:
//   mode & 1 == 0  the stored CRC is checked as given: exercises the check itself
//   mode & 1 == 1  the stored CRC is set to the file's first, as the manifest of an intact
//                  checkpoint has it, so the fuzzer reaches the decoder behind the check (without
//                  this, a random file never gets past it)
//   mode & 2       full decode (resume: optimizer moments and layer states), else weights only
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "core/crc32c.h"
#include "core/optim/state_layout.h"
#include "train/checkpoint_slice.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const int mode = data[0];
  uint32_t stored = 0;
  std::memcpy(&stored, data + 1, 4);
  const std::string file(reinterpret_cast<const char*>(data + 5), size - 5);
  const uint32_t computed = frugal::crc32c(std::as_bytes(std::span<const char>(file.data(), file.size())));
  if (mode & 1) stored = computed;
  try {
    frugal::train::check_checksum("fuzz/slice0.ckpt", stored, computed);
    std::istringstream in(file, std::ios::binary);
    const frugal::train::SliceFile f = frugal::train::decode_slice(in, "fuzz/slice0.ckpt", (mode & 2) != 0);
    for (const frugal::train::StoredParam& p : f.params) {
      if (p.row_steps.size() != p.value.rows()) __builtin_trap();
      for (const frugal::Tensor* t : {&p.m, &p.v})
        if (frugal::optim::state_layout(*t, p.value) == frugal::optim::StateLayout::invalid) __builtin_trap();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
