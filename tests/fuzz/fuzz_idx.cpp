// libFuzzer target: the IDX readers (core/data/idx_file.h) on a file holding the input; the first
// byte picks images (even) or labels (odd), and whether to go on to a Dataset. Any input must be
// read or refused with frugal::Error naming the file; a header that claims more data than the file
// holds must not allocate the claimed size.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "core/data/idx_file.h"

namespace {
// One scratch file per fuzzing process, rewritten for every input; in memory where /dev/shm
// exists (on a disk-backed /tmp the writes held the target to ~200 executions a second).
const std::string& scratch_file() {
  // Never freed: a static std::string would be destroyed before the exit handler that removes the
  // folder runs.
  static const std::string* dir = [] {
    auto* d = new std::string(std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                              "/frugal-fuzz-idx-XXXXXX");
    if (mkdtemp(d->data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(*dir); });
    return d;
  }();
  static const std::string path = *dir + "/input-idx-ubyte";
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& path = scratch_file();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 1) std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  try {
    if (data[0] % 2 == 0) {
      const auto images = frugal::data::IdxFile::read_images(path);
      // Checked by division: the product of the header's sizes can wrap (as it did in the reader).
      const uint64_t per_image = uint64_t{images.rows} * images.cols;
      if (per_image == 0 || images.pixels.size() % per_image != 0 || images.pixels.size() / per_image != images.count)
        __builtin_trap();
      if (data[0] % 4 == 0) {
        const std::vector<uint8_t> labels(images.count, 1);
        frugal::data::IdxFile::to_dataset(images, labels, path);
      }
    } else {
      frugal::data::IdxFile::read_labels(path);
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
