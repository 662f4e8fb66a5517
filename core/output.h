// Where frugal's words go: a run's progress lines (stdout) and its notes, warnings and progress
// bars (stderr). By default the process's streams; a program that shows them its own way (the
// Python module: sys.stdout and logging; a GUI; a test) installs a sink for the length of a call.
// Every line the library writes passes through here, so `quiet` and capture work wherever it runs.
#pragma once

#include <functional>
#include <string_view>

namespace frugal {

enum class OutputStream { progress, notice };  // stdout, stderr

// Receives whole pieces of text, each ending in a newline (a terminal's redrawn progress bar ends
// in none; a sink sees no bars: only the plain periodic lines).
using OutputSink = std::function<void(OutputStream stream, std::string_view text)>;

// Writes `text` to the installed sink, else to stdout / stderr.
void write_output(OutputStream stream, std::string_view text);
// Writes `text` to stdout / stderr themselves (what write_output does without a sink; a sink that
// routes only one stream writes the other with it).
void write_standard_stream(OutputStream stream, std::string_view text);
// Whether a sink is installed (then progress bars are plain lines, not redrawn in place).
bool output_redirected();

// Installs `sink` until destroyed (the previous one, or none, comes back). One sink for the
// process: the ranks of an in-process run share it.
class ScopedOutputSink {
 public:
  explicit ScopedOutputSink(OutputSink sink);
  ~ScopedOutputSink();
  ScopedOutputSink(const ScopedOutputSink&) = delete;
  ScopedOutputSink& operator=(const ScopedOutputSink&) = delete;

 private:
  OutputSink previous_;
};

}  // namespace frugal
