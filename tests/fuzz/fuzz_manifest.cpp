// libFuzzer target: the checkpoint manifest (manifest.json) parser and validator
// (train/checkpoint_manifest.h). Every input must end in a checked manifest or frugal::Error
// naming the file and field; any other exception (nlohmann's type or parse errors, std::out_of_range,
// std::invalid_argument from a number conversion) or a crash is a bug. A manifest that is accepted
// must name only files inside its epoch folder, one per model slice, each with a checksum if any.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/check.h"
#include "train/checkpoint_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const frugal::CheckpointManifest m = frugal::parse_manifest(in, "fuzz/manifest.json");
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
  } catch (const frugal::Error&) {
  }
  return 0;
}
