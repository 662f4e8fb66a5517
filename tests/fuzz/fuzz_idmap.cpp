// libFuzzer target: the DLRM checkpoint's id map (ids.bin, layers/dlrm/id_map.h IdMap::from_bytes).
// Any input must be read or refused with frugal::Error; any other exception (std::bad_alloc or
// std::length_error from a count in the bytes) or a crash is a bug. A map that is accepted must give
// every id rows inside its field's tables, since the embedding tables are indexed by them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "layers/dlrm/id_map.h"

using frugal::layers::IdMap;
using frugal::layers::kMissingId;
using frugal::layers::kNoRow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const IdMap m = IdMap::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz/ids.bin");
    std::vector<uint32_t> out(m.lookups());
    for (size_t f = 0; f < m.num_fields() && f < 64; ++f) {
      const auto& tables = m.table_rows(f);
      if (tables.empty() || tables.size() > m.lookups()) __builtin_trap();
      // Ids near the ones a small map holds, a large one and the missing id.
      for (const uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{1000},
                                uint64_t{0xdeadbeef}, kMissingId}) {
        m.rows(f, id, out.data());
        for (size_t l = 0; l < out.size(); ++l) {
          if (l < tables.size() ? out[l] != kNoRow && out[l] >= tables[l] : out[l] != kNoRow) __builtin_trap();
        }
      }
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
