// libFuzzer target: the XMC text reader (core/data/xmc_reader.h), streamed in chunks of 7 points
// the way `frugal predict` reads. Any input must be read or refused with frugal::Error; any other
// exception (std::bad_alloc from a count in the header, a library's own error) or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "core/data/xmc_reader.h"
#include "core/sparse_batch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    frugal::data::XmcReader reader(in, "fuzz.txt");
    frugal::SparseBatch batch;
    while (reader.read(batch, 7) > 0) {
      if (batch.size() > reader.num_points()) __builtin_trap();  // more points than the header said
      batch.clear();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
