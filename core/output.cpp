#include "core/output.h"

#include <cstdio>
#include <mutex>
#include <utility>

namespace frugal {
namespace {
std::mutex g_mutex;
OutputSink g_sink;
}  // namespace

void write_output(OutputStream stream, std::string_view text) {
  std::lock_guard lock(g_mutex);
  if (g_sink) {
    g_sink(stream, text);
    return;
  }
  write_standard_stream(stream, text);
}

void write_standard_stream(OutputStream stream, std::string_view text) {
  std::FILE* f = stream == OutputStream::progress ? stdout : stderr;
  std::fwrite(text.data(), 1, text.size(), f);
  // A line at a time reaches a pipe in order with the other stream's (the launcher merges them).
  if (!text.empty() && text.back() == '\n') std::fflush(f);
}

bool output_redirected() {
  std::lock_guard lock(g_mutex);
  return static_cast<bool>(g_sink);
}

ScopedOutputSink::ScopedOutputSink(OutputSink sink) {
  std::lock_guard lock(g_mutex);
  previous_ = std::exchange(g_sink, std::move(sink));
}

ScopedOutputSink::~ScopedOutputSink() {
  std::lock_guard lock(g_mutex);
  g_sink = std::move(previous_);
}

}  // namespace frugal
