// An output file written under a temporary name next to its target (TARGET.tmp-<pid>) and renamed
// over it once complete, like checkpoints (core/atomic_file.h) but streamed: a run that fails
// half-way (a full disk, an error, a kill) leaves no partial or empty TARGET, and a retry starts
// clean. What the data tools (synth-xmc, shuffle, split, gcide, ctr), predictions, plots and JSON
// reports write through. A TARGET that is a device or FIFO (/dev/null, /dev/stdout) is written in
// place, its writes checked the same way (a full /dev/full fails); a folder is refused.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace frugal {

class StagedFile {
 public:
  // Opens the temporary file (frugal::Error naming TARGET when it cannot be created).
  explicit StagedFile(std::string target);
  // Not committed: the temporary file is removed.
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // Appends bytes; throws frugal::Error naming TARGET when the write fails (disk full).
  void write(std::string_view bytes);
  // Flushes, fsyncs and renames the file to TARGET (replacing one that exists); `exclusive`: refuse
  // (frugal::Error) when TARGET exists instead (a key file is never overwritten).
  void commit(bool exclusive = false);
  const std::string& target() const { return target_; }

 private:
  std::string target_, temp_;
  std::FILE* file_ = nullptr;
  bool direct_ = false;  // TARGET is a device or FIFO: written in place (no temporary, no rename)
};

}  // namespace frugal
