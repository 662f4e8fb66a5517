// libFuzzer target: the files kept beside a checkpoint (core/data/checked_file.h): label_counts.bin,
// label_centroids.bin and nearest_points.bin, read by predict, evaluate and Python. Every input is
// loaded or refused with frugal::Error naming the file, in frugal's words; a bad count in a file
// never becomes an allocation of that size (std::bad_alloc, std::length_error) or a crash.
//
// The first byte picks the file (mode % 3) and whether the trailing CRC32C is fixed (mode & 4), so
// that the fuzzer reaches the decoders behind the check (without it a random file never passes).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/data/label_centroids.h"
#include "core/data/label_counts_file.h"
#include "core/data/nearest_points.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((mode & 4) && file.size() >= 4) {
    const uint32_t crc = frugal::crc32c(std::as_bytes(std::span<const char>(file.data(), file.size() - 4)));
    std::memcpy(file.data() + file.size() - 4, &crc, 4);
  }
  const char* names[] = {frugal::kLabelCountsFile, frugal::data::kLabelCentroidsFile, frugal::data::kNearestPointsFile};
  fuzz_input_file(names[mode % 3], file);
  const std::string& dir = fuzz_scratch_dir();
  try {
    switch (mode % 3) {
      case 0: {
        const auto counts = frugal::load_label_counts(dir);
        if (counts) {
          uint64_t sum = 0;
          for (const uint64_t c : counts->per_label) sum += c;
          (void)sum;
        }
        break;
      }
      case 1: (void)frugal::data::LabelCentroids::load(dir).num_labels(); break;
      default: (void)frugal::data::NearestPoints::load(dir).num_labels(); break;
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, file);
  }
  return 0;
}
