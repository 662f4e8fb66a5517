// libFuzzer target: `frugal launch --hostfile FILE` (apps/launch/hostfile.h) and the placement of ranks on
// its hosts. Every input is read or refused with frugal::Error in frugal's words; a host that is
// accepted is one ssh takes as a destination, never an option or shell syntax (it goes into ssh's
// argv and, quoted, into the remote command), with at least one slot. The first byte is the rank
// count placed (1-64).
#include <cstddef>
#include <cstdint>
#include <string>

#include "apps/launch/hostfile.h"
#include "core/check.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "tests/fuzz/library_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int ranks = 1 + data[0] % 64;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string path = fuzz_input_file("hosts", text);
  try {
    const auto hosts = frugal::cli::read_hostfile(path);
    for (const auto& h : hosts) {
      if (h.host.empty() || h.host.front() == '-' || h.slots < 1) __builtin_trap();
      for (const char c : h.host)
        if (c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '"' || c == '$' || c == '`' || c == ';' ||
            c == '|' || c == '&' || c == '\\')
          __builtin_trap();
    }
    const auto placed = frugal::cli::place_ranks(hosts, ranks, path);
    if (placed.size() != static_cast<size_t>(ranks)) __builtin_trap();
    // The remote command quotes every word: one argument, whatever the directory and command hold.
    const std::string remote = frugal::cli::remote_command(text.substr(0, 64), {{"FRUGAL_X", text.substr(0, 16)}},
                                                           {"frugal", text.substr(0, 32)}, 5);
    if (remote.rfind("sh -c '", 0) != 0) __builtin_trap();
  } catch (const frugal::Error& e) {
    trap_on_library_words(e, text);
  }
  return 0;
}
