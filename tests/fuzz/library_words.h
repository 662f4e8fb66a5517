// Every fuzz target's errors must speak frugal's words: a message that carries a library's own text
// (nlohmann's "[json.exception...", std::bad_alloc, basic_filebuf, cereal's "Failed to read",
// std::stoul, map::at, oneDNN's status) is a finding like a crash. The `fuzz` test replays every
// corpus input through these checks; tests/apps/test_library_words.sh greps the suite's own output.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

// `input`: the fuzzed bytes. A message may quote the input (a parameter name, a token), which the
// fuzzer fills with anything: a library text that the input itself holds is not counted.
inline void trap_on_library_words(const std::exception& e, std::string_view input) {
  const std::string what = e.what();
  // Specific texts only: a message may quote the input (a parameter name, a token), which can hold anything.
  for (const char* library : {"[json.exception.", "basic_filebuf", "basic_string::", "bad_alloc", "Failed to read ",
                              "stoul", "map::at", "vector::_M", "could not create a primitive"})
    if (what.find(library) != std::string::npos && input.find(library) == std::string_view::npos) {
      std::fprintf(stderr, "an error in a library's words (\"%s\"): %s\n", library, what.c_str());
      __builtin_trap();
    }
}
