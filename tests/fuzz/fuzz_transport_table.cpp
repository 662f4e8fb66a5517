// libFuzzer target: the transport table of `frugal bench comm --tune` (comm/transport_table.h),
// read by `--transport-map auto`. Every input is read or refused with frugal::Error in frugal's
// words; a table that is accepted answers every kind at any size and serializes to JSON that reads
// back to the same table (its digest, which ranks compare at start, is stable).
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/transport_table.h"
#include "core/check.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = fuzz_input_file("transport-table.json", text);
  try {
    const frugal::comm::TransportTable t = frugal::comm::load_transport_table(path);
    for (int k = 0; k < frugal::comm::kOpRoutes; ++k)
      for (const uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1} << 40, ~uint64_t{0}})
        (void)t.best(static_cast<frugal::comm::OpRoute>(k), bytes);
    (void)t.per_kind();
    const frugal::comm::TransportTable again =
        frugal::comm::load_transport_table(fuzz_input_file("transport-table-again.json", t.to_json()));
    if (again.digest() != t.digest()) __builtin_trap();
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, text);
  }
  return 0;
}
