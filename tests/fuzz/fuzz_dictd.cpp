// libFuzzer target: the dictd reader (core/data/dictd_file.h) that `frugal data gcide` reads
// Debian's GCIDE with. Any input must be read or refused with frugal::Error; any other exception
// (std::out_of_range from an entry pointing past the text, a library's own error) or a crash is a bug.
//
// The first byte picks a mode, the rest is the .index file, a NUL byte, then the .dict file:
//   mode % 2 == 0  in memory (DictdFile::parse): the text is taken as already decompressed
//   mode % 2 == 1  both written to files and read with DictdFile::open, so the .dict bytes go
//                  through zlib's gzip/dictzip decoder (or its plain-file pass-through)
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "core/data/dictd_file.h"

namespace {

// One scratch folder per process (parallel fuzzing jobs do not share files), in memory where
// /dev/shm exists: on a disk-backed /tmp writing the two files costs 4 ms an input, on tmpfs 0.6 ms.
const std::string& scratch_dir() {
  // Never freed: a static std::string would be destroyed before the exit handler that removes the
  // folder runs.
  static const std::string* dir = [] {
    const char* env = std::getenv("TMPDIR");
    const std::string base = env != nullptr ? env : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    auto* t = new std::string(base + "/fuzz_dictd.XXXXXX");
    if (mkdtemp(t->data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return t;
  }();
  return *dir;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 2;
  const std::string all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = all.find('\0');
  const std::string index = all.substr(0, nul), dict = nul == std::string::npos ? "" : all.substr(nul + 1);
  try {
    frugal::data::DictdFile d;
    if (mode == 0) {
      std::istringstream in(index);
      d = frugal::data::DictdFile::parse(in, dict, "fuzz.index", "fuzz.dict");
    } else {
      const std::string ip = scratch_dir() + "/fuzz.index", dp = scratch_dir() + "/fuzz.dict.dz";
      write_file(ip, index);
      write_file(dp, dict);
      d = frugal::data::DictdFile::open(ip, dp);
    }
    // What `frugal data gcide` does next: every article's text, which must lie inside the dictionary.
    for (const auto& e : d.articles()) {
      const std::string_view t = d.text(e);
      if (t.size() != e.length) __builtin_trap();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, {reinterpret_cast<const char*>(data), size});
  }
  return 0;
}
