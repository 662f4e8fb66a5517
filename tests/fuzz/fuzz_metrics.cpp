// libFuzzer target: the metrics log reader (apps/plot/metrics_lines.h) that `frugal plot`, `frugal plan
// --validate` and `bench roofline` read: one JSON object a line. Every input is read or refused with
// frugal::Error naming the file and line, in frugal's words (never nlohmann's); every epoch line
// read_epoch_lines returns is an object with a whole "epoch" number.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/plot/metrics_lines.h"
#include "core/check.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = fuzz_input_file("metrics.jsonl", text);
  try {
    size_t lines = 0;
    frugal::cli::for_each_metrics_line(path, [&](nlohmann::json&) { ++lines; });
    for (const nlohmann::json& e : frugal::cli::read_epoch_lines(path))
      if (!e.is_object() || !e.contains("epoch") || !e["epoch"].is_number_unsigned()) __builtin_trap();
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, text);
  }
  return 0;
}
