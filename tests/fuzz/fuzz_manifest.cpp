// libFuzzer target: the checkpoint manifest (manifest.json) parser and validator
// (train/checkpoint_manifest.h). Every input must end in a checked manifest or frugal::Error
// naming the file and field; any other exception (nlohmann's type or parse errors, std::out_of_range,
// std::invalid_argument from a number conversion) or a crash is a bug. A manifest that is accepted
// must name only files inside its epoch folder, one per model slice, each with a checksum if any.
// Each input is parsed twice: as a user loads it (its own checksum required, core/sealed_json.h) and
// with --accept-unchecked-checkpoint (the fields' checks behind it reached by mutated seeds). No
// error may speak a library's words.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tests/fuzz/library_words.h"
#include "train/checkpoint_manifest.h"

namespace {

void parse_one(const std::string& text, bool accept_unchecked) {
  std::istringstream in(text);
  try {
    const frugal::train::CheckpointManifest m = frugal::train::parse_manifest(in, "fuzz/manifest.json", accept_unchecked);
    if (m.model_slices < 1 || m.model_slices > m.world_size || m.replicas < 1) __builtin_trap();
    if (m.files.size() < static_cast<size_t>(m.model_slices)) __builtin_trap();
    for (const std::string& f : m.files) {
      // "<folder>/<name>" with one plain name: no further '/', and not "." or ".." (a name that
      // merely starts with "..", like "..slice1.ckpt", stays inside the folder).
      if (f.rfind(m.folder + "/", 0) != 0) __builtin_trap();
      const std::string name = f.substr(m.folder.size() + 1);
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) __builtin_trap();
      if (!m.checksums.empty() && !m.checksums.contains(f)) __builtin_trap();
    }
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  parse_one(text, false);
  parse_one(text, true);
  return 0;
}
