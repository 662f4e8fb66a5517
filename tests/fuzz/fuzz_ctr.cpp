// libFuzzer target: the Criteo-format CTR reader (core/data/ctr_reader.h, ctr_format.h), streamed
// in batches of 5 samples the way training reads, then rewound once as the next epoch does. Any input
// must be read or refused with frugal::Error; any other exception (std::out_of_range or
// std::invalid_argument from a number conversion) or a crash is a bug, and every batch must have the
// sizes its `size` says.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "core/data/ctr_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    frugal::data::CtrReader reader(in, "fuzz.tsv");
    frugal::data::CtrBatch batch;
    for (int epoch = 0; epoch < 2; ++epoch) {
      size_t total = 0;
      while (reader.next(5, batch) > 0) {
        batch.validate();
        for (size_t i = 0; i < batch.size; ++i)
          if (batch.labels[i] != 0.0f && batch.labels[i] != 1.0f) __builtin_trap();
        total += batch.size;
      }
      if (total != reader.samples_read()) __builtin_trap();
      reader.rewind();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
